// Package skills loads skills: folders with a SKILL.md (a YAML manifest in
// front matter, then the instructions in Markdown) and optional tool
// scripts. Skills are found in the workspace's skills/ folder and in
// skill_dirs; POST /skills/rescan hot-loads them. An agent names the skills
// it uses (skills: [...]): their instructions are added to its system
// prompt and their tools are offered as skill__<skill>__<tool>.
//
// Installing a skill (install.go) fetches it, checks its shape (no path
// escapes, no symlinks out), scans its scripts statically (scan.go), runs
// each tool once in a sandbox (sandbox.go) and installs it only with the
// caller's consent to exactly what was reviewed (the content digest).
package skills

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/toolgrant"
)

// ManifestFile is the file every skill folder has.
const ManifestFile = "SKILL.md"

// Limits of a skill folder: a skill is instructions and small scripts, not
// a data set.
const (
	maxFiles      = 500
	maxTotalBytes = 20 << 20
	maxManifest   = 256 << 10
)

// ValidName reports whether name can be a skill's name (the rule is
// toolgrant's).
func ValidName(name string) bool { return toolgrant.ValidSkillName(name) }

// toolRe: tool names; no "__" (the separator).
var toolRe = regexp.MustCompile(`^[a-z0-9]+([_-][a-z0-9]+)*$`)

// Skill is one loaded skill.
type Skill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Version     string `json:"version,omitempty"`
	Tools       []Tool `json:"tools"`
	// Instructions is the Markdown body of SKILL.md.
	Instructions string `json:"instructions"`
	// Dir is the folder the skill was loaded from.
	Dir string `json:"dir"`
	// Digest is sha256 over every file's path, mode and content: what a
	// consent refers to and what a rescan compares.
	Digest string `json:"digest"`
	// Permissions are what the manifest asks for at run time (granted only
	// with the operator's consent at install: sandboxed.go).
	Permissions Permissions `json:"permissions,omitzero"`
}

// Tool is a script of a skill offered to the model.
type Tool struct {
	Name        string `json:"name" yaml:"name"`
	Description string `json:"description" yaml:"description"`
	// Script is the executable, relative to the skill folder. It gets the
	// call's JSON arguments on stdin; its stdout is the result, a non-zero
	// exit an error result.
	Script string `json:"script" yaml:"script"`
	// Parameters is the JSON schema of the arguments (an object schema).
	Parameters json.RawMessage `json:"parameters,omitempty" yaml:"-"`
}

// manifest is SKILL.md's front matter.
type manifest struct {
	Name        string      `yaml:"name"`
	Description string      `yaml:"description"`
	Version     string      `yaml:"version"`
	Permissions Permissions `yaml:"permissions"`
	Tools       []struct {
		Name        string         `yaml:"name"`
		Description string         `yaml:"description"`
		Script      string         `yaml:"script"`
		Parameters  map[string]any `yaml:"parameters"`
	} `yaml:"tools"`
}

// RefusedError: the folder is not a usable skill; Reason says why.
type RefusedError struct {
	Dir    string
	Reason string
}

func (e *RefusedError) Error() string { return fmt.Sprintf("skill %s refused: %s", e.Dir, e.Reason) }

// Fault implements fault.Fault: 400 skill_refused with the reason.
func (e *RefusedError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindInvalid, Code: "skill_refused", Message: e.Error(), Fields: map[string]any{"reason": e.Reason}}
}

func refuse(dir, format string, args ...any) error {
	return &RefusedError{Dir: dir, Reason: fmt.Sprintf(format, args...)}
}

// Load reads and checks the skill in dir: SKILL.md parses, names are valid,
// no file or symlink leads outside the folder, every tool script is a
// regular executable file inside it.
func Load(dir string) (*Skill, error) {
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, refuse(dir, "cannot read the folder: %v", err)
	}
	digest, err := checkTree(dir, root)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(root, ManifestFile))
	if err != nil {
		return nil, refuse(dir, "no %s", ManifestFile)
	}
	if len(raw) > maxManifest {
		return nil, refuse(dir, "%s is larger than %d bytes", ManifestFile, maxManifest)
	}
	front, body, err := splitFrontMatter(raw)
	if err != nil {
		return nil, refuse(dir, "%s: %v", ManifestFile, err)
	}
	var m manifest
	dec := yaml.NewDecoder(bytes.NewReader(front))
	dec.KnownFields(true)
	if err := dec.Decode(&m); err != nil && err != io.EOF {
		return nil, refuse(dir, "%s front matter: %v", ManifestFile, err)
	}
	s := &Skill{Name: m.Name, Description: strings.TrimSpace(m.Description), Version: m.Version,
		Instructions: strings.TrimSpace(string(body)), Dir: root, Digest: digest, Tools: []Tool{}, Permissions: m.Permissions}
	if !ValidName(s.Name) {
		return nil, refuse(dir, "name %q must be 1-40 lower-case letters, digits and single hyphens", s.Name)
	}
	if s.Description == "" {
		return nil, refuse(dir, "description is required (it tells the model when to use the skill)")
	}
	seen := map[string]bool{}
	for i, t := range m.Tools {
		if !toolRe.MatchString(t.Name) || len(t.Name) > 40 {
			return nil, refuse(dir, "tools[%d]: name %q must be lower-case letters, digits, single _ or -", i, t.Name)
		}
		if seen[t.Name] {
			return nil, refuse(dir, "tools[%d]: %s is listed twice", i, t.Name)
		}
		seen[t.Name] = true
		if err := checkScript(root, t.Script); err != nil {
			return nil, refuse(dir, "tool %s: %v", t.Name, err)
		}
		params := json.RawMessage(`{"type":"object","properties":{}}`)
		if t.Parameters != nil {
			if typ, _ := t.Parameters["type"].(string); typ != "object" {
				return nil, refuse(dir, "tool %s: parameters must be an object schema (type: object)", t.Name)
			}
			params, _ = json.Marshal(t.Parameters)
		}
		desc := strings.TrimSpace(t.Description)
		if desc == "" {
			desc = fmt.Sprintf("Tool %s of skill %s.", t.Name, s.Name)
		}
		s.Tools = append(s.Tools, Tool{Name: t.Name, Description: desc, Script: filepath.ToSlash(filepath.Clean(t.Script)), Parameters: params})
	}
	return s, nil
}

// splitFrontMatter cuts "---\n<yaml>\n---\n<body>".
func splitFrontMatter(raw []byte) (front, body []byte, err error) {
	text := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
	rest, ok := bytes.CutPrefix(text, []byte("---\n"))
	if !ok {
		return nil, nil, fmt.Errorf("must start with a front matter block (---)")
	}
	if front, body, ok = bytes.Cut(rest, []byte("\n---\n")); ok {
		return front, body, nil
	}
	if front, ok = bytes.CutSuffix(rest, []byte("\n---")); ok {
		return front, nil, nil
	}
	return nil, nil, fmt.Errorf("the front matter block is not closed (---)")
}

// checkScript: a relative path to a regular, executable file inside root
// (symlinks resolved).
func checkScript(root, script string) error {
	if script == "" {
		return fmt.Errorf("script is required")
	}
	if filepath.IsAbs(script) || !filepath.IsLocal(filepath.FromSlash(script)) {
		return fmt.Errorf("script %q leaves the skill folder", script)
	}
	full := filepath.Join(root, filepath.FromSlash(script))
	real, err := filepath.EvalSymlinks(full)
	if err != nil {
		return fmt.Errorf("script %s does not exist", script)
	}
	if !inside(root, real) {
		return fmt.Errorf("script %s leads outside the skill folder", script)
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("script %s is not a regular file", script)
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("script %s is not executable (chmod +x)", script)
	}
	return nil
}

func inside(root, p string) bool {
	return p == root || strings.HasPrefix(p, root+string(filepath.Separator))
}

// checkTree walks the folder: symlinks must resolve inside it, special
// files are refused, and the size is bounded. It returns the digest.
func checkTree(dir, root string) (string, error) {
	type file struct {
		rel  string
		mode fs.FileMode
		link string
	}
	var files []file
	var total int64
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if len(files) >= maxFiles {
			return refuse(dir, "more than %d files", maxFiles)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		f := file{rel: filepath.ToSlash(rel), mode: info.Mode()}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return refuse(dir, "symlink %s does not resolve", f.rel)
			}
			if !inside(root, target) {
				return refuse(dir, "symlink %s points outside the skill folder", f.rel)
			}
			f.link, _ = os.Readlink(p)
		case d.IsDir():
		case info.Mode().IsRegular():
			total += info.Size()
			if total > maxTotalBytes {
				return refuse(dir, "larger than %d bytes", maxTotalBytes)
			}
		default:
			return refuse(dir, "%s is not a regular file, folder or symlink", f.rel)
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		if _, ok := err.(*RefusedError); ok {
			return "", err
		}
		return "", refuse(dir, "cannot read: %v", err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].rel < files[j].rel })
	h := sha256.New()
	for _, f := range files {
		// Only the kind and the owner's execute bit: umask and checkout
		// differences must not change the digest.
		fmt.Fprintf(h, "%s\x00%d%t\x00%s\x00", f.rel, f.mode.Type(), f.mode&0o100 != 0, f.link)
		if f.mode.IsRegular() {
			fh, err := os.Open(filepath.Join(root, filepath.FromSlash(f.rel)))
			if err != nil {
				return "", refuse(dir, "cannot read %s", f.rel)
			}
			_, err = io.Copy(h, fh)
			fh.Close()
			if err != nil {
				return "", refuse(dir, "cannot read %s", f.rel)
			}
		}
		h.Write([]byte{0})
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}
