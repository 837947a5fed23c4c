package agentpkg

import (
	"strings"
	"testing"
)

// TestFormatErrorsNameTheValue: a package without a format (or with one of
// the wrong type) was refused with "format is %!q(<nil>)" (#42).
func TestFormatErrorsNameTheValue(t *testing.T) {
	for doc, want := range map[string]string{
		`{}`:                      "format is missing",
		`{"format": null}`:        "format is null",
		`{"format": 7}`:           "format is 7",
		`{"format": {"a": 1}}`:    "format is an object",
		`{"format": "zip"}`:       `format is "zip"`,
		`{"format": true}`:        "format is true",
		`{"format": ["agentry"]}`: "format is an array",
	} {
		_, err := Verify([]byte(doc), VerifyOptions{})
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "%!") {
			t.Errorf("%s: got %v, want it to say %q", doc, err, want)
		}
	}
	_, err := Verify([]byte(`{"format": "`+FormatName+`"}`), VerifyOptions{})
	if err == nil || !strings.Contains(err.Error(), "format_version missing") {
		t.Errorf("missing format_version: got %v", err)
	}
}
