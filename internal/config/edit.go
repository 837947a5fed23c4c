package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// The one YAML editor of the project, used by the gateway (PATCH /config,
// SetKeys) and by the agentry CLI (context, setup and registry commands,
// EditFile): it changes a document through its node tree, so keys, order
// and comments an edit does not touch survive, and renders it with a
// 2-space indent.

// errTopNotMapping: the document's top level is not a mapping.
var errTopNotMapping = errors.New("the top level is not a mapping")

// parseDocument reads a YAML document for editing; empty data (blank, or
// comments only) is an empty mapping.
func parseDocument(data []byte) (*yaml.Node, error) {
	empty := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	if len(bytes.TrimSpace(data)) == 0 {
		return empty, nil
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind == 0 {
		return empty, nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errTopNotMapping
	}
	return &doc, nil
}

// renderDocument writes doc back as YAML.
func renderDocument(doc *yaml.Node) ([]byte, error) {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	enc.Close()
	return out.Bytes(), nil
}

// SetKeys returns the YAML document data with each dotted key set to its
// value, editing the document tree so comments, key order and keys this
// version does not know survive. A value equal to Redacted leaves the key
// unchanged, so a redacted GET /config body can be sent back as it is.
// It returns the keys that actually changed.
func SetKeys(data []byte, set map[string]any) ([]byte, []string, error) {
	doc, err := parseDocument(data)
	if errors.Is(err, errTopNotMapping) {
		return nil, nil, errors.New("current config: the document is not a mapping")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("current config: %w", err)
	}
	root := doc.Content[0]
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var changed []string
	for _, key := range keys {
		val := set[key]
		if s, ok := val.(string); ok && s == Redacted {
			continue
		}
		parts := strings.Split(key, ".")
		for _, p := range parts {
			if p == "" {
				return nil, nil, fmt.Errorf("%q is not a dotted key path", key)
			}
		}
		if text, ok := val.(string); ok && isHeadersKey(key) && strings.Contains(text, Redacted) {
			// Header lines written back as read keep their hidden values.
			merged, err := MergeRedactedHeaders(getPath(root, parts), text)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %w", key, err)
			}
			val = merged
		}
		var vnode yaml.Node
		if err := vnode.Encode(val); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", key, err)
		}
		did, err := SetPath(root, parts, &vnode)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", key, err)
		}
		if did {
			changed = append(changed, key)
		}
	}
	out, err := renderDocument(doc)
	if err != nil {
		return nil, nil, err
	}
	return out, changed, nil
}

// EditFile changes the YAML file at path through its node tree: edit gets
// the top-level mapping. A missing file starts empty. check (may be nil)
// sees the rendered result before anything is written. The result
// replaces the file atomically; a new file gets mode 0600 (config.yaml may
// hold API keys), an existing one keeps its mode.
func EditFile(path string, edit func(root *yaml.Node) error, check func([]byte) error) error {
	mode := fs.FileMode(0o600)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, serr := os.Stat(path); serr == nil {
			mode = st.Mode().Perm()
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("read %s: %w", path, err)
	}
	doc, err := parseDocument(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := edit(doc.Content[0]); err != nil {
		return err
	}
	out, err := renderDocument(doc)
	if err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	if check != nil {
		if err := check(out); err != nil {
			return err
		}
	}
	if err := WriteFileAtomic(path, out, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// SetPath sets the key path parts (segments of a dotted key) in mapping m
// to val, creating the mappings on the way (a null becomes one; another
// non-mapping is an error). The replaced value's comments move to val. It
// reports whether the document changed.
func SetPath(m *yaml.Node, parts []string, val *yaml.Node) (bool, error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != parts[0] {
			continue
		}
		if len(parts) == 1 {
			prev := m.Content[i+1]
			old, _ := yaml.Marshal(prev)
			now, _ := yaml.Marshal(val)
			val.HeadComment, val.LineComment, val.FootComment = prev.HeadComment, prev.LineComment, prev.FootComment
			m.Content[i+1] = val
			return !bytes.Equal(old, now), nil
		}
		child := m.Content[i+1]
		if child.Kind != yaml.MappingNode {
			if child.Tag != "!!null" {
				return false, fmt.Errorf("%s is not a mapping", parts[0])
			}
			*child = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		}
		return SetPath(child, parts[1:], val)
	}
	// Key absent: create it (and any parents).
	node := val
	for i := len(parts) - 1; i >= 1; i-- {
		node = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{StringNode(parts[i]), node}}
	}
	m.Content = append(m.Content, StringNode(parts[0]), node)
	return true, nil
}

// DeletePath removes the key path parts from mapping m; it reports whether
// it was there.
func DeletePath(m *yaml.Node, parts []string) bool {
	for i := 0; m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != parts[0] {
			continue
		}
		if len(parts) == 1 {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return true
		}
		return DeletePath(m.Content[i+1], parts[1:])
	}
	return false
}

// StringNode is a YAML string scalar.
func StringNode(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
}

// ValueNode encodes any value (number, bool, list) as a node.
func ValueNode(v any) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return StringNode(fmt.Sprint(v))
	}
	return &n
}

// WriteFileAtomic replaces path with data (temp file beside it, synced,
// renamed), so a reader never sees half a file. config.yaml is written with
// mode 0600 since it may hold secrets.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".config-*.yaml")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// getPath is the scalar value at parts in the mapping m, or "".
func getPath(m *yaml.Node, parts []string) string {
	for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value != parts[0] {
			continue
		}
		if len(parts) == 1 {
			return m.Content[i+1].Value
		}
		return getPath(m.Content[i+1], parts[1:])
	}
	return ""
}
