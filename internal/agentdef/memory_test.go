package agentdef

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestMemoryOptIn(t *testing.T) {
	for body, want := range map[string][]string{
		"id: a\n":                                      nil,
		"id: a\nmemory: false\n":                       nil,
		"id: a\nmemory: true\n":                        {ToolMemoryWrite, ToolMemorySearch, ToolMemoryReadFile, ToolMemoryWriteFile},
		"id: a\nmemory: {files: false}\n":              {ToolMemoryWrite, ToolMemorySearch},
		"id: a\nmemory: {enabled: false, hot: true}\n": nil,
	} {
		d, err := Parse([]byte(body), "a.yaml")
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		if got := d.Memory.MemoryTools(); !slices.Equal(got, want) {
			t.Errorf("%q: tools %v, want %v", body, got, want)
		}
		for _, tool := range want {
			if !slices.Contains(d.ToolGrants(), tool) {
				t.Errorf("%q: %s not granted", body, tool)
			}
		}
	}
	d, _ := Parse([]byte("id: a\nmemory: {hot: false, archive: false}\n"), "a.yaml")
	if d.Memory.HotOn() || d.Memory.ArchiveOn(true) || !d.Memory.FilesOn() {
		t.Errorf("block: %+v", d.Memory)
	}
	if d, _ := Parse([]byte("id: a\nmemory: true\n"), "a.yaml"); !d.Memory.ArchiveOn(true) || d.Memory.ArchiveOn(false) {
		t.Error("archive follows memory.archive when the agent does not say")
	}
	for body, msg := range map[string]string{
		"id: a\nmemory: {hott: true}\n": "memory.hott is not a memory option",
		"id: a\nmemory: maybe\n":        "memory must be true, false or a block",
		"id: a\nmemory: [1]\n":          "memory must be true, false or a block",
	} {
		if _, err := Parse([]byte(body), "a.yaml"); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%q: %v, want %q", body, err, msg)
		}
	}
	var m Memory
	if err := json.Unmarshal([]byte(`true`), &m); err != nil || !m.On() {
		t.Fatalf("json true: %+v %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"files": false}`), &m); err != nil || !m.On() || m.FilesOn() {
		t.Fatalf("json block: %+v %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"nope": 1}`), &m); err == nil {
		t.Fatal("json unknown key accepted")
	}
}
