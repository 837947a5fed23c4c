package agentdef

import "testing"

// FuzzParse: any agent definition file parses into a valid definition or is
// an error; never a panic, and an accepted temperature is a number in 0..2.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"id: a\n", "id: hook\ntrigger: webhook\nwebhook: {text_path: \"a..b\"}\n", "id: c\ntrigger: cron\nschedule: {cron: \"*/5 * * * *\"}\n",
		"id: [\n", "id: x\nllm: {temperature: 3}\n", "id: x\nmax_turns: -1\n", "", "- a\n",
		// Regression seed: a NaN temperature passed the range check (NaN compares false).
		"id: x\nllm: {temperature: .nan}\n"} {
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
		if tp := d.LLM.Temperature; tp != nil && !(*tp >= 0 && *tp <= 2) {
			t.Fatalf("accepted temperature %v", *tp)
		}
	})
}
