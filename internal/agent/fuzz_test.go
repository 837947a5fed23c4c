package agent

import "testing"

// FuzzParse: any agent definition file parses into a valid definition or is
// an error; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"id: a\n", "id: hook\ntrigger: webhook\nwebhook: {text_path: \"a..b\"}\n", "id: c\ntrigger: cron\nschedule: {cron: \"*/5 * * * *\"}\n",
		"id: [\n", "id: x\nllm: {temperature: 3}\n", "id: x\nmax_turns: -1\n", "", "- a\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := Parse(doc, "fuzz.yaml")
		if err != nil {
			return
		}
		if verr := d.Validate(); verr != nil {
			t.Fatalf("Parse accepted a definition that Validate refuses: %v", verr)
		}
	})
}
