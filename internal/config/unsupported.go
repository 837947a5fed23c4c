package config

import (
	"fmt"
	"sort"
	"strings"
)

// The keys this version reads and does nothing with (issue 43). Setting
// one to anything but its default refuses the start and PATCH /config,
// instead of silently not doing what the operator asked; `agentry doctor`
// lists them. When a later issue builds one, its row goes: deleting the
// line is the whole change (TestEveryKeyIsEffectiveOrRefused then wants
// the key in its effective list, with the file that reads it).
var unsupported = []unsupportedKey{
	{"runtime.max_sessions", flag(func(c *Config) bool { return c.Runtime.MaxSessions != Defaults().Runtime.MaxSessions })},
	// The vector store is built in parallel (issue 45): memory searches are
	// full-text until it is wired in.
	{"memory.vector", flag(func(c *Config) bool { return c.Memory.Vector })},
	{"queue", flag(func(c *Config) bool { return len(c.Queue) > 0 })},
	{"storage.backend: external", func(c *Config) []string { return when(c.Storage.Backend == "external", "storage.backend: external") }},
	// server.tls serves with cert_file and key_file; these two are read
	// only under temporal.tls (a client's settings).
	{"server.tls.ca_file", flag(func(c *Config) bool { return c.Server.TLS.CAFile != "" })},
	{"server.tls.server_name", flag(func(c *Config) bool { return c.Server.TLS.ServerName != "" })},
	{"llm.providers.<id>.retention", func(c *Config) []string {
		var keys []string
		for id, p := range c.LLM.Providers {
			keys = append(keys, when(p.Retention != "", "llm.providers."+id+".retention")...)
		}
		sort.Strings(keys)
		return keys
	}},
}

type unsupportedKey struct {
	// Key is the dotted key as in config.yaml (<id> or <adapter> for any).
	Key string
	// Set lists the keys of c that set it to a non-default value.
	Set func(c *Config) []string
}

// flag is the Set of a single key: the row's own key when set is true.
func flag(set func(c *Config) bool) func(c *Config) []string {
	return func(c *Config) []string {
		if set(c) {
			return []string{""} // replaced by the row's key
		}
		return nil
	}
}

func when(cond bool, key string) []string {
	if cond {
		return []string{key}
	}
	return nil
}

func mapKeys(prefix string, m map[string]any, suffix string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, prefix+k+suffix)
	}
	sort.Strings(out)
	return out
}

// UnsupportedKeys are the keys of the table, for documentation and tests.
func UnsupportedKeys() []string {
	out := make([]string, 0, len(unsupported))
	for _, u := range unsupported {
		out = append(out, u.Key)
	}
	return out
}

// UnsupportedError names every key of a configuration that this version
// would ignore.
type UnsupportedError struct{ Keys []string }

func (e *UnsupportedError) Error() string {
	them := "them"
	if len(e.Keys) == 1 {
		them = "it"
	}
	return fmt.Sprintf("not supported yet: %s (this version would ignore %s; remove %s)", strings.Join(e.Keys, ", "), them, them)
}

// Unsupported lists the keys c sets that this version does not act on, or
// returns nil.
func Unsupported(c *Config) *UnsupportedError {
	var keys []string
	for _, u := range unsupported {
		for _, k := range u.Set(c) {
			if k == "" {
				k = u.Key
			}
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return &UnsupportedError{Keys: keys}
}
