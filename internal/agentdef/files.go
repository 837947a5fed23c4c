package agentdef

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/fault"
)

// Errors of definition-file management.
var (
	// ErrExists: an agent with that id is loaded, or its file already exists.
	ErrExists = fault.Conflict("exists", "agent already exists")
	// ErrNotFound: no loaded agent has that id.
	ErrNotFound = fault.NotFound("agent not found")
)

// OutsideDirError refuses to change a definition that lives outside the
// managed folder (an agent_dirs entry the operator manages by hand).
type OutsideDirError struct {
	ID   string
	File string
	Dir  string
}

func (e *OutsideDirError) Error() string {
	return fmt.Sprintf("agent %q is defined in %s, outside the workspace agents folder %s; edit or remove that file by hand", e.ID, e.File, e.Dir)
}

// Fault implements fault.Fault: 409 outside_workspace, naming the file.
func (e *OutsideDirError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindConflict, Code: "outside_workspace", Message: e.Error(), Fields: map[string]any{"file": e.File}}
}

// Files writes agent definition files into one managed folder (the
// workspace's agents folder) and reloads the registry after each change, so
// the API sees the result at once instead of at the next poll. Files are
// replaced atomically (temporary file + rename) and rewritten through the
// YAML node tree, so keys, order and comments the change does not touch are
// kept.
type Files struct {
	Dir      string
	Registry *Registry

	mu sync.Mutex
}

// NewFiles manages definitions in dir for registry.
func NewFiles(dir string, registry *Registry) *Files { return &Files{Dir: dir, Registry: registry} }

// Create validates a definition (YAML text) and writes it as <dir>/<id>.yaml.
// source names the text in error messages (the client's file name). It
// never replaces an existing file or shadows a loaded agent.
func (f *Files) Create(data []byte, source string) (*Definition, error) {
	if source == "" {
		source = "definition"
	}
	def, err := ParseWith(data, source, f.Registry.Refs())
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if prev, ok := f.Registry.Get(def.ID); ok {
		return nil, fmt.Errorf("%w: %q is defined in %s", ErrExists, def.ID, prev.File)
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create agents folder: %w", err)
	}
	path := filepath.Join(f.Dir, def.ID+".yaml")
	for _, p := range []string{path, filepath.Join(f.Dir, def.ID+".yml")} {
		if _, err := os.Stat(p); err == nil {
			return nil, fmt.Errorf("%w: file %s exists (it may not have loaded; see the gateway log)", ErrExists, p)
		}
	}
	if err := writeExclusive(path, data); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("%w: file %s exists", ErrExists, path)
		}
		return nil, err
	}
	f.Registry.Reload()
	got, ok := f.Registry.Get(def.ID)
	if !ok {
		return nil, fmt.Errorf("agent %q was written to %s but did not load", def.ID, path)
	}
	return got, nil
}

// SetEnabled rewrites the enabled key of an agent's file (wherever the
// registry found it) and reloads.
func (f *Files) SetEnabled(id string, enabled bool) (*Definition, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	def, ok := f.Registry.Get(id)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	data, err := os.ReadFile(def.File)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", def.File, err)
	}
	out, err := setTopLevelBool(data, "enabled", enabled)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", def.File, err)
	}
	if err := replaceFile(def.File, out); err != nil {
		return nil, err
	}
	f.Registry.Reload()
	got, ok := f.Registry.Get(id)
	if !ok {
		return nil, fmt.Errorf("agent %q did not load after rewriting %s", id, def.File)
	}
	return got, nil
}

// Delete removes an agent's file when it lies inside the managed folder.
func (f *Files) Delete(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	def, ok := f.Registry.Get(id)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	if !insideDir(f.Dir, def.File) {
		return &OutsideDirError{ID: id, File: def.File, Dir: f.Dir}
	}
	if err := os.Remove(def.File); err != nil {
		return fmt.Errorf("remove %s: %w", def.File, err)
	}
	f.Registry.Reload()
	return nil
}

// DefinitionFromJSON turns a definition sent as a JSON object into YAML
// text in block style, the shape of a hand-written file.
func DefinitionFromJSON(raw []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("definition is not a JSON object: %w", err)
	}
	if n.Kind != yaml.DocumentNode || len(n.Content) == 0 || n.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("definition must be an object")
	}
	blockStyle(&n)
	return yaml.Marshal(&n)
}

func blockStyle(n *yaml.Node) {
	if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
		n.Style &^= yaml.FlowStyle
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		n.Style = 0 // let the encoder pick plain or quoted
		if strings.Contains(n.Value, "\n") {
			n.Style = yaml.LiteralStyle
		}
	}
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// setTopLevelBool sets key: value in the document's top-level mapping,
// keeping everything else; a new key goes right after id.
func setTopLevelBool(data []byte, key string, value bool) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("an agent definition must be a YAML mapping")
	}
	m := doc.Content[0]
	val := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(value)}
	at := -1
	for i := 0; i+1 < len(m.Content); i += 2 {
		switch m.Content[i].Value {
		case key:
			m.Content[i+1] = val
			return encodeYAML(&doc)
		case "id":
			at = i + 2
		}
	}
	if at < 0 {
		at = len(m.Content)
	}
	kn := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}
	m.Content = append(m.Content[:at], append([]*yaml.Node{kn, val}, m.Content[at:]...)...)
	return encodeYAML(&doc)
}

func encodeYAML(n *yaml.Node) ([]byte, error) {
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// writeExclusive writes data to path only if path does not exist: the
// content goes to a temporary file first and is hard-linked into place,
// which fails atomically when another writer got there first.
func writeExclusive(path string, data []byte) error {
	tmp, err := writeTemp(path, data, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// replaceFile swaps path's content atomically, keeping its mode.
func replaceFile(path string, data []byte) error {
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp, err := writeTemp(path, data, mode)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

func writeTemp(path string, data []byte, mode fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), mode)
	}
	if werr != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write %s: %w", path, werr)
	}
	return f.Name(), nil
}

func insideDir(dir, file string) bool {
	d, err1 := filepath.Abs(dir)
	f, err2 := filepath.Abs(file)
	if err1 != nil || err2 != nil {
		return false
	}
	if rd, err := filepath.EvalSymlinks(d); err == nil {
		d = rd
	}
	if rf, err := filepath.EvalSymlinks(f); err == nil {
		f = rf
	}
	rel, err := filepath.Rel(d, f)
	return err == nil && rel != "." && !strings.HasPrefix(rel, "..") && !filepath.IsAbs(rel)
}
