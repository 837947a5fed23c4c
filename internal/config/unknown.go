package config

import (
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// UnknownKey is a key of config.yaml that is in no part of the schema: a
// typo (`costs.enforcment_mode`) or a key of another version. It is kept as
// written (reading and writing the file never drops it) and read by
// nothing, so the gateway warns at start and `agentry doctor` lists it
// (issue 43: no setting silently does nothing). It is not refused: a file
// shared with a newer gateway must still start an older one.
type UnknownKey struct {
	Key string
	// Near is the known key at the same level closest in spelling (at most
	// two edits away), or "".
	Near string
}

func (u UnknownKey) String() string {
	if u.Near != "" {
		return fmt.Sprintf("%s (did you mean %s?)", u.Key, u.Near)
	}
	return u.Key
}

// UnknownKeys lists the unknown keys of a config.yaml's text in key order.
// Keys under the sections kept as free-form maps (mcp, memory, ...) are not
// looked at. Text that does not parse has none (Parse reports it).
func UnknownKeys(data []byte) []UnknownKey {
	var root yaml.Node
	if yaml.Unmarshal(data, &root) != nil {
		return nil
	}
	out := unknownIn(&root, reflect.TypeOf(Config{}), "")
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// UnknownKeysInFile is UnknownKeys of the file at path ("" or unreadable:
// none).
func UnknownKeysInFile(path string) []UnknownKey {
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return UnknownKeys(data)
}

func unknownIn(n *yaml.Node, t reflect.Type, path string) []UnknownKey {
	n, t = valueNode(n, t)
	if n == nil {
		return nil
	}
	var out []UnknownKey
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if f, ok := fieldByYAMLName(t, key); ok {
				out = append(out, unknownIn(n.Content[i+1], f.Type, join(path, key))...)
			} else if m, ok := inlineMap(t); ok && key != "<<" {
				// An entry of an inline map (channels.<id>): its value is
				// the map's element.
				out = append(out, unknownIn(n.Content[i+1], m.Type.Elem(), join(path, key))...)
			} else if key != "<<" {
				out = append(out, UnknownKey{Key: join(path, key), Near: nearest(key, yamlNames(t))})
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode || t.Elem().Kind() == reflect.Interface {
			return nil // a free-form section
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			out = append(out, unknownIn(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))...)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			out = append(out, unknownIn(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}

// inlineMap is a struct's `yaml:",inline"` map field of typed entries
// (free-form ones are not looked into).
func inlineMap(t reflect.Type) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if _, opts, _ := strings.Cut(f.Tag.Get("yaml"), ","); opts == "inline" && f.Type.Kind() == reflect.Map {
			return f, f.Type.Elem().Kind() != reflect.Interface
		}
	}
	return reflect.StructField{}, false
}

// yamlNames are the keys a struct type reads.
func yamlNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" && name != "-" {
			names = append(names, name)
		}
	}
	return names
}

// nearest is the candidate at most two edits from key (the fewest wins;
// the first of equals), or "".
func nearest(key string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(key, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is Levenshtein's distance over bytes (keys are ASCII).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
