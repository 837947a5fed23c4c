package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// SetKeys returns the YAML document data with each dotted key set to its
// value, editing the document tree so comments, key order and keys this
// version does not know survive. A value equal to Redacted leaves the key
// unchanged, so a redacted GET /config body can be sent back as it is.
// It returns the keys that actually changed.
func SetKeys(data []byte, set map[string]any) ([]byte, []string, error) {
	var doc yaml.Node
	if len(bytes.TrimSpace(data)) > 0 {
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, nil, fmt.Errorf("current config: %w", err)
		}
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, nil, errors.New("current config: the document is not a mapping")
	}
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
		did, err := setPath(root, parts, &vnode)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", key, err)
		}
		if did {
			changed = append(changed, key)
		}
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, nil, err
	}
	enc.Close()
	return out.Bytes(), changed, nil
}

func setPath(m *yaml.Node, parts []string, val *yaml.Node) (bool, error) {
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
		return setPath(child, parts[1:], val)
	}
	// Key absent: create it (and any parents).
	node := val
	for i := len(parts) - 1; i >= 1; i-- {
		node = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{{Kind: yaml.ScalarNode, Tag: "!!str", Value: parts[i]}, node}}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: parts[0]}, node)
	return true, nil
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
