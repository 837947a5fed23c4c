package agentpkg

import "testing"

// FuzzVerify: any package file verifies or is refused with an error; never
// a panic.
func FuzzVerify(f *testing.F) {
	for _, s := range []string{`{"format":"agentry-agent"}`, `{}`, `[]`, `{"format":"agentry-agent","format_version":1,"checksum":"x","agent":{}}`, ``, `{"files":[{"path":"../x"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		_, _ = Verify(doc, VerifyOptions{})
	})
}
