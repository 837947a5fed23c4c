package agentry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/config"
)

// editYAMLFile changes a YAML file through its node tree, so keys, order
// and comments the edit does not touch survive. A missing file starts
// empty. The result replaces the file atomically; a new file gets mode 0600
// (config.yaml may hold API keys), an existing one keeps its mode.
func editYAMLFile(path string, edit func(root *yaml.Node) error) error {
	return editYAMLFileChecked(path, edit, nil)
}

// editYAMLFileChecked is editYAMLFile with a check of the rendered result
// before anything is written.
func editYAMLFileChecked(path string, edit func(root *yaml.Node) error, check func([]byte) error) error {
	doc := &yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	mode := fs.FileMode(0o600)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if st, serr := os.Stat(path); serr == nil {
			mode = st.Mode().Perm()
		}
		if strings.TrimSpace(string(data)) != "" {
			var n yaml.Node
			if err := yaml.Unmarshal(data, &n); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if n.Kind != yaml.DocumentNode || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
				return fmt.Errorf("%s: the top level is not a mapping", path)
			}
			doc = &n
		}
	case errors.Is(err, fs.ErrNotExist):
	default:
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := edit(doc.Content[0]); err != nil {
		return err
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	enc.Close()
	if check != nil {
		if err := check([]byte(b.String())); err != nil {
			return err
		}
	}
	if err := config.WriteFileAtomic(path, []byte(b.String()), mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// mapChild returns the value node of key in mapping m, creating an empty
// mapping there when create is set (nil otherwise).
func mapChild(m *yaml.Node, key string, create bool) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind != yaml.MappingNode && create {
				v = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
				m.Content[i+1] = v
			}
			return v
		}
	}
	if !create {
		return nil
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}

// setPath sets a dotted path (as segments) to a value node, creating
// mappings on the way.
func setPath(root *yaml.Node, path []string, value *yaml.Node) {
	m := root
	for _, seg := range path[:len(path)-1] {
		m = mapChild(m, seg, true)
	}
	last := path[len(path)-1]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == last {
			m.Content[i+1] = value
			return
		}
	}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: last}, value)
}

// deletePath removes a dotted path; it reports whether it was there.
func deletePath(root *yaml.Node, path []string) bool {
	m := root
	for _, seg := range path[:len(path)-1] {
		if m = mapChild(m, seg, false); m == nil || m.Kind != yaml.MappingNode {
			return false
		}
	}
	last := path[len(path)-1]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == last {
			m.Content = append(m.Content[:i], m.Content[i+2:]...)
			return true
		}
	}
	return false
}

func strNode(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }

// valueNode encodes any value (number, bool, list) as a node.
func valueNode(v any) *yaml.Node {
	var n yaml.Node
	if err := n.Encode(v); err != nil {
		return strNode(fmt.Sprint(v))
	}
	return &n
}
