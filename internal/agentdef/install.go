package agentdef

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BundleDir is where an agent's bundled files (tools/, evals/, prompts/,
// samples/) live: the folder named after the agent beside its definition
// file. The registry reads only *.yaml files, so the folder is never taken
// for a definition.
func BundleDir(def *Definition) string {
	return filepath.Join(filepath.Dir(def.File), def.ID)
}

// Install writes a definition (YAML text) as <dir>/<id>.yaml and its
// bundled files below <dir>/<id>/, all or nothing: everything is written
// into a hidden staging folder first and renamed into place. Without
// overwrite an existing agent (or file) is refused with ErrExists; with
// it, the old definition and bundle are replaced (only inside the managed
// folder). bundle maps slash paths to contents; the caller has checked the
// paths, and they are checked again here.
func (f *Files) Install(data []byte, bundle map[string][]byte, overwrite bool) (*Definition, error) {
	def, err := Parse(data, "package")
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	yamlPath := filepath.Join(f.Dir, def.ID+".yaml")
	bundlePath := filepath.Join(f.Dir, def.ID)
	if prev, ok := f.Registry.Get(def.ID); ok {
		if !overwrite {
			return nil, fmt.Errorf("%w: %q is defined in %s (use --overwrite to replace it)", ErrExists, def.ID, prev.File)
		}
		if !insideDir(f.Dir, prev.File) {
			return nil, &OutsideDirError{ID: def.ID, File: prev.File, Dir: f.Dir}
		}
	}
	olds := []string{yamlPath, filepath.Join(f.Dir, def.ID+".yml"), bundlePath}
	if !overwrite {
		for _, p := range olds {
			if _, err := os.Lstat(p); err == nil {
				return nil, fmt.Errorf("%w: %s exists (use --overwrite to replace it)", ErrExists, p)
			}
		}
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create agents folder: %w", err)
	}
	stage, err := os.MkdirTemp(f.Dir, ".install-"+def.ID+"-")
	if err != nil {
		return nil, fmt.Errorf("stage install: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := writeStaged(stage, data, bundle); err != nil {
		return nil, err
	}
	// Move the old files aside, then the new ones in; undo on failure.
	var moved [][2]string
	undo := func() {
		for i := len(moved) - 1; i >= 0; i-- {
			os.RemoveAll(moved[i][1])
			os.Rename(moved[i][0], moved[i][1])
		}
	}
	aside := filepath.Join(stage, "old")
	if err := os.Mkdir(aside, 0o700); err != nil {
		return nil, fmt.Errorf("stage install: %w", err)
	}
	for i, p := range olds {
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		to := filepath.Join(aside, fmt.Sprint(i))
		if err := os.Rename(p, to); err != nil {
			undo()
			return nil, fmt.Errorf("move %s aside: %w", p, err)
		}
		moved = append(moved, [2]string{to, p})
	}
	if err := os.Rename(filepath.Join(stage, "def.yaml"), yamlPath); err != nil {
		undo()
		return nil, fmt.Errorf("install %s: %w", yamlPath, err)
	}
	if len(bundle) > 0 {
		if err := os.Rename(filepath.Join(stage, "bundle"), bundlePath); err != nil {
			os.Remove(yamlPath)
			undo()
			return nil, fmt.Errorf("install %s: %w", bundlePath, err)
		}
	}
	f.Registry.Reload()
	got, ok := f.Registry.Get(def.ID)
	if !ok {
		return nil, fmt.Errorf("agent %q was written to %s but did not load", def.ID, yamlPath)
	}
	return got, nil
}

func writeStaged(stage string, data []byte, bundle map[string][]byte) error {
	if err := os.WriteFile(filepath.Join(stage, "def.yaml"), data, 0o644); err != nil {
		return fmt.Errorf("stage install: %w", err)
	}
	root := filepath.Join(stage, "bundle")
	for rel, content := range bundle {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if r, err := filepath.Rel(root, p); err != nil || r == "." || strings.HasPrefix(r, "..") || filepath.IsAbs(rel) {
			return errors.New("bundled file " + rel + " escapes the bundle folder")
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("stage install: %w", err)
		}
		if err := os.WriteFile(p, content, 0o644); err != nil {
			return fmt.Errorf("stage install: %w", err)
		}
	}
	return nil
}

// WithEnabled returns a definition's YAML text with enabled set, keeping
// everything else.
func WithEnabled(data []byte, enabled bool) ([]byte, error) {
	return setTopLevelBool(data, "enabled", enabled)
}
