package temporaldefaults

import (
	"maps"
	"strings"
	"testing"
	"time"
)

func TestLoadEmbeddedFile(t *testing.T) {
	f, err := Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if f.Namespace != "default" {
		t.Errorf("namespace = %q, want default", f.Namespace)
	}
	if f.Retention != 72*time.Hour {
		t.Errorf("retention = %s, want 72h", f.Retention)
	}
	want := Embedded{Host: "127.0.0.1", FrontendPort: 7233, UIPort: 8233, UIEnabled: true}
	if f.Embedded != want {
		t.Errorf("embedded = %+v, want %+v", f.Embedded, want)
	}
	attrs, err := f.ParsedSearchAttributes()
	if err != nil {
		t.Fatalf("ParsedSearchAttributes: %v", err)
	}
	// workflows' TestSearchAttributesMatchTemporalYAML checks them against
	// the attributes the workflows set.
	if !maps.Equal(attrs, SearchAttributes()) || len(attrs) == 0 {
		t.Errorf("search attributes in temporal.yaml = %v, SearchAttributes() = %v", attrs, SearchAttributes())
	}
	if len(f.DynamicConfig) == 0 {
		t.Error("dynamic_config is empty")
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	valid := "namespace: default\nretention: 72h\nembedded: {host: 127.0.0.1, frontend_port: 7233, ui_port: 8233}\n"
	tests := []struct {
		name, doc, wantErr string
	}{
		{"unknown key", valid + "namspace: x\n", "namspace"},
		{"short retention", strings.Replace(valid, "72h", "1h", 1), "retention"},
		{"bad host", strings.Replace(valid, "127.0.0.1", "localhost", 1), "embedded.host"},
		{"bad port", strings.Replace(valid, "7233", "70000", 1), "embedded.frontend_port"},
		{"bad search attribute type", valid + "search_attributes: {AgentryTaskID: Integer}\n", "search_attributes.AgentryTaskID"},
		{"empty namespace", strings.Replace(valid, "namespace: default", "namespace: \"\"", 1), "namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse error = %v, want one mentioning %q", err, tt.wantErr)
			}
		})
	}
	if _, err := Parse([]byte(valid)); err != nil {
		t.Fatalf("valid document rejected: %v", err)
	}
}
