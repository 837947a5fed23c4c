package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// jsonEnvKeys are the list and map keys an environment variable sets with
// a JSON value (issue 43): go-envconfig addresses scalars and string
// lists only. A list is replaced; a map is merged entry by entry (an entry
// of the same id is replaced). Every entry of mcp and
// costs.reconciliation.providers that exists (in the file or an earlier
// variable) can also be replaced alone: AGENTRY_MCP_<ID>.
var jsonEnvKeys = []struct {
	key string
	// target is the field; entries names a map's entries (nil for a list).
	target  func(c *Config) any
	entries func(c *Config) []string
}{
	{"hooks", func(c *Config) any { return &c.Hooks }, nil},
	{"registries", func(c *Config) any { return &c.Registries }, nil},
	{"auth.keys", func(c *Config) any { return &c.Auth.Keys }, nil},
	{"mcp", func(c *Config) any { return &c.MCP }, func(c *Config) []string { return sortedKeys(c.MCP) }},
	{"costs.reconciliation.providers", func(c *Config) any { return &c.Costs.Reconciliation.Providers },
		func(c *Config) []string { return sortedKeys(c.Costs.Reconciliation.Providers) }},
}

// JSONEnvVars are the variables of jsonEnvKeys, for documentation.
func JSONEnvVars() []string {
	out := make([]string, 0, len(jsonEnvKeys))
	for _, k := range jsonEnvKeys {
		out = append(out, envName(k.key))
	}
	return out
}

func envName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// applyJSONEnv applies the JSON-valued variables of jsonEnvKeys.
func applyJSONEnv(cfg *Config, env Env) error {
	for _, k := range jsonEnvKeys {
		name := envName(k.key)
		if raw, ok := env(name); ok && strings.TrimSpace(raw) != "" {
			if err := decodeJSONEnv(name, raw, k.target(cfg), k.entries != nil); err != nil {
				return err
			}
		}
		if k.entries == nil {
			continue
		}
		for _, id := range k.entries(cfg) {
			entryVar := name + "_" + envID(id)
			raw, ok := env(entryVar)
			if !ok || strings.TrimSpace(raw) == "" {
				continue
			}
			// The entry alone, as a one-entry map merged over the rest.
			wrapped := fmt.Sprintf("{%q: %s}", id, raw)
			if err := checkJSON(entryVar, raw); err != nil {
				return err
			}
			if err := decodeJSONEnv(entryVar, wrapped, k.target(cfg), true); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkJSON refuses a value that is not JSON, naming the variable and
// where it stops parsing.
func checkJSON(name, raw string) error {
	var v any
	err := json.Unmarshal([]byte(raw), &v)
	if err == nil {
		return nil
	}
	off := int64(len(raw))
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	line, col := position(raw, off)
	return fmt.Errorf("environment variable %s: not valid JSON at line %d, column %d (byte %d): %v", name, line, col, off, err)
}

// position is the 1-based line and column of the byte at which the JSON
// decoder stopped (a SyntaxError's Offset counts the bytes read, that one
// included).
func position(s string, off int64) (int, int) {
	i := int(off) - 1
	if i < 0 {
		i = 0
	}
	if i > len(s) {
		i = len(s)
	}
	before := s[:i]
	return strings.Count(before, "\n") + 1, i - strings.LastIndex(before, "\n")
}

// decodeJSONEnv decodes raw (JSON, which YAML reads as it is, so the yaml
// tags name the fields) into the field ptr points at: replacing a list,
// merging a map.
func decodeJSONEnv(name, raw string, ptr any, merge bool) error {
	if err := checkJSON(name, raw); err != nil {
		return err
	}
	var node yaml.Node
	if err := yaml.Unmarshal([]byte(raw), &node); err != nil {
		return fmt.Errorf("environment variable %s: %v", name, err)
	}
	if len(node.Content) == 1 {
		want, got := yaml.SequenceNode, node.Content[0].Kind
		if merge {
			want = yaml.MappingNode
		}
		if got != want {
			shape := "a JSON array ([...])"
			if merge {
				shape = "a JSON object ({\"<id>\": {...}})"
			}
			return fmt.Errorf("environment variable %s: want %s", name, shape)
		}
	}
	if !merge {
		if err := node.Decode(ptr); err != nil {
			return fmt.Errorf("environment variable %s: %s", name, yamlMessage(err))
		}
		return nil
	}
	switch m := ptr.(type) {
	case *map[string]any:
		var next map[string]any
		if err := node.Decode(&next); err != nil {
			return fmt.Errorf("environment variable %s: %s", name, yamlMessage(err))
		}
		if *m == nil {
			*m = map[string]any{}
		}
		maps.Copy(*m, next)
	case *map[string]ReconciliationProviderConfig:
		var next map[string]ReconciliationProviderConfig
		if err := node.Decode(&next); err != nil {
			return fmt.Errorf("environment variable %s: %s", name, yamlMessage(err))
		}
		if *m == nil {
			*m = map[string]ReconciliationProviderConfig{}
		}
		maps.Copy(*m, next)
	default:
		return fmt.Errorf("environment variable %s: cannot be set from the environment", name)
	}
	return nil
}

// yamlMessage drops yaml.v3's "line 1:" (the value is one line of JSON).
func yamlMessage(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		msgs := make([]string, len(te.Errors))
		for i, e := range te.Errors {
			msgs[i] = yamlLineRe.ReplaceAllString(e, "$2")
		}
		return strings.Join(msgs, "; ")
	}
	return err.Error()
}
