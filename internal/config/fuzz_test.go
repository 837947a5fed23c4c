package config

import "testing"

// FuzzParse: any config file parses (and then validates) or is an error
// naming the file; never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"server: {port: 8080}\n", "server: {port: 1.5}\n", "llm:\n  providers:\n    p: {type: openai, max_retries: 2}\n",
		"a: &x {b: *x}\n", "server:\n  port: many\n", "costs:\n  pricing:\n    a/b: {input_per_mtok: -2}\n", "{", "- 1\n- 2\n", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		c := Defaults()
		if err := Parse(doc, "fuzz.yaml", &c); err != nil {
			return
		}
		_ = Validate(&c)
	})
}
