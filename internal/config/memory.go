package config

import "path/filepath"

// DefaultHotMemoryChars is memory.hot_memory_chars when unset: how many
// characters of an agent's hot memories (the facts memory_write stored for
// one agent and user) are pinned into its system prompt before a turn.
const DefaultHotMemoryChars = 2000

// MemoryConfig is the memory section (docs/memory.md): what agents that opt
// in with `memory: true` remember across sessions.
type MemoryConfig struct {
	// HotMemoryChars caps the hot memories pinned into the system prompt
	// (the most recently written or used first; the rest stay searchable).
	// It is also the most one memory_write may store.
	HotMemoryChars int `yaml:"hot_memory_chars" env:"HOT_MEMORY_CHARS"`
	// FileMemoryDir holds the markdown notes of file memory, one folder per
	// agent and user ("": <workspace>/memory). Relative: to the workspace.
	FileMemoryDir string `yaml:"file_memory_dir,omitempty" env:"FILE_MEMORY_DIR"`
	// Archive makes finished conversations (chat exchanges, finished task
	// runs) of memory agents searchable through memory_search.
	Archive bool `yaml:"archive" env:"ARCHIVE"`
	// Vector is the legacy vector toggle (semantic search of memories); not
	// supported by this version: true refuses the start.
	Vector bool           `yaml:"vector,omitempty" env:"VECTOR"`
	Extra  map[string]any `yaml:",inline"`
}

// defaultMemory is the memory section when config.yaml has none.
func defaultMemory() MemoryConfig {
	return MemoryConfig{HotMemoryChars: DefaultHotMemoryChars, Archive: true}
}

// MemoryDir is the file-memory root of a loaded configuration: the
// configured memory.file_memory_dir (relative to the workspace), or
// <workspace>/memory.
func (l *Loaded) MemoryDir() string {
	d := l.Memory.FileMemoryDir
	switch {
	case d == "":
		return filepath.Join(l.Workspace.Root, "memory")
	case filepath.IsAbs(d):
		return d
	default:
		return filepath.Join(l.Workspace.Root, d)
	}
}

// minHotMemoryChars is the smallest memory.hot_memory_chars: one short
// fact must fit.
const minHotMemoryChars = 100

// maxHotMemoryChars bounds memory.hot_memory_chars: the pinned memories are
// sent with every turn, so a cap past this is a mistake, not a wish.
const maxHotMemoryChars = 200_000

func validateMemory(m MemoryConfig, bad func(key, format string, args ...any)) {
	if m.HotMemoryChars < minHotMemoryChars || m.HotMemoryChars > maxHotMemoryChars {
		bad("memory.hot_memory_chars", "%d is out of range (%d to %d)", m.HotMemoryChars, minHotMemoryChars, maxHotMemoryChars)
	}
}
