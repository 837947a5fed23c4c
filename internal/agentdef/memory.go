package agentdef

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Memory is an agent's memory opt-in (docs/memory.md):
//
//	memory: true                     # hot memory, file memory and archive
//	memory: {files: false}           # a block: each part on unless turned off
//
// Absent or false: the agent remembers nothing beyond its session and has
// no memory tools.
type Memory struct {
	Enabled bool `yaml:"enabled" json:"enabled"`
	// Hot pins the agent's memories of the user into its system prompt
	// (memory.hot_memory_chars). Default true.
	Hot *bool `yaml:"hot,omitempty" json:"hot,omitempty"`
	// Files gives the agent memory_read_file and memory_write_file over its
	// markdown notes. Default true.
	Files *bool `yaml:"files,omitempty" json:"files,omitempty"`
	// Archive makes the agent's finished conversations searchable; default
	// memory.archive of config.yaml.
	Archive *bool `yaml:"archive,omitempty" json:"archive,omitempty"`
}

var memoryKeys = []string{"enabled", "hot", "files", "archive"}

// UnmarshalYAML takes a boolean or a block.
func (m *Memory) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		var on bool
		if err := n.Decode(&on); err != nil {
			return fmt.Errorf("line %d: memory must be true, false or a block of %s", n.Line, strings.Join(memoryKeys, ", "))
		}
		*m = Memory{Enabled: on}
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: memory must be true, false or a block of %s", n.Line, strings.Join(memoryKeys, ", "))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i].Value; !slices.Contains(memoryKeys, k) {
			return fmt.Errorf("line %d: memory.%s is not a memory option (use %s)", n.Content[i].Line, k, strings.Join(memoryKeys, ", "))
		}
	}
	type plain Memory
	p := plain{Enabled: true} // a block turns memory on unless enabled: false
	if err := n.Decode(&p); err != nil {
		return err
	}
	*m = Memory(p)
	return nil
}

// UnmarshalJSON takes a boolean or an object, like the YAML form.
func (m *Memory) UnmarshalJSON(b []byte) error {
	var on bool
	if err := json.Unmarshal(b, &on); err == nil {
		*m = Memory{Enabled: on}
		return nil
	}
	type plain Memory
	p := plain{Enabled: true}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("memory must be true, false or an object of %s: %v", strings.Join(memoryKeys, ", "), err)
	}
	*m = Memory(p)
	return nil
}

// On reports whether the agent uses memory.
func (m *Memory) On() bool { return m != nil && m.Enabled }

// HotOn reports whether hot memory is pinned into the agent's prompt.
func (m *Memory) HotOn() bool { return m.On() && (m.Hot == nil || *m.Hot) }

// FilesOn reports whether the agent has the file-memory tools.
func (m *Memory) FilesOn() bool { return m.On() && (m.Files == nil || *m.Files) }

// ArchiveOn reports whether the agent's finished conversations are
// archived, given memory.archive of the configuration.
func (m *Memory) ArchiveOn(configured bool) bool {
	if !m.On() {
		return false
	}
	if m.Archive != nil {
		return *m.Archive
	}
	return configured
}

// Memory tool names (internal/memory implements them).
const (
	ToolMemoryWrite     = "memory_write"
	ToolMemorySearch    = "memory_search"
	ToolMemoryReadFile  = "memory_read_file"
	ToolMemoryWriteFile = "memory_write_file"
)

// MemoryTools are the memory tools an agent is granted.
func (m *Memory) MemoryTools() []string {
	if !m.On() {
		return nil
	}
	out := []string{ToolMemoryWrite, ToolMemorySearch}
	if m.FilesOn() {
		out = append(out, ToolMemoryReadFile, ToolMemoryWriteFile)
	}
	return out
}
