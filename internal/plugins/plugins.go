// Package plugins loads out-of-process extensions from plugin_dirs (and the
// workspace plugins/ folder): a folder holding plugin.yaml (id, version,
// executable relative to the folder, the tools it offers) and that
// executable, which speaks MCP over stdio (docs/plugins.md). A plugin is
// started confined like a skill's scripts (internal/sandbox: its folder
// read-only at /plugin, a work folder of its own at /work, no network, the
// runtime.sandbox caps) and connected through internal/mcp, so its tools
// are offered to agents as mcp__<id>__<tool> under the same grants (an
// agent's mcp: [<id>]). plugins_config.<id> reaches it as the JSON of
// AGENTRY_PLUGIN_CONFIG. Rescan (periodic, and POST /plugins/rescan)
// starts new or changed plugins and stops removed ones.
package plugins

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/sandbox"
)

// ManifestName is the manifest's file name in a plugin folder.
const ManifestName = "plugin.yaml"

// Mount is where a plugin's folder is seen inside its sandbox.
const Mount = "/plugin"

// Environment of a plugin process.
const (
	EnvConfig = "AGENTRY_PLUGIN_CONFIG" // plugins_config.<id> as JSON ({} when unset)
	EnvID     = "AGENTRY_PLUGIN_ID"
	EnvDir    = "AGENTRY_PLUGIN_DIR" // Mount
)

// PluginAddressSpace is the least RLIMIT_AS of a plugin process (16 GiB
// of address space; see spec).
const PluginAddressSpace = 16 << 30

// SourcePlugin is the MCP source of a plugin's server.
const SourcePlugin = "plugin"

// Manifest is plugin.yaml.
type Manifest struct {
	ID          string `yaml:"id" json:"id"`
	Version     string `yaml:"version" json:"version"`
	Description string `yaml:"description,omitempty" json:"description,omitempty"`
	// Executable is the program, relative to the plugin folder; it must
	// stay inside the folder (no .., no symlink out) and be executable.
	Executable string   `yaml:"executable" json:"executable"`
	Args       []string `yaml:"args,omitempty" json:"args,omitempty"`
	// Protocol is mcp-stdio (the only one, and the default).
	Protocol string `yaml:"protocol,omitempty" json:"protocol"`
	// Tools are the tools it says it offers (what it lists over MCP is
	// what agents get; a difference is reported in the status).
	Tools []string `yaml:"tools,omitempty" json:"tools,omitempty"`
}

// Plugin is one scanned plugin folder.
type Plugin struct {
	Manifest
	Dir string `json:"dir"`
	// Status: running (connected), starting, failed (its MCP connection),
	// invalid (not loaded: Error says why).
	Status string `json:"status"`
	Error  string `json:"error,omitempty"`
	// Offered are the tools it lists over MCP.
	Offered []string `json:"offered,omitempty"`
	// Missing are manifest tools it does not list.
	Missing []string `json:"missing,omitempty"`

	exe  string // host path of the executable
	hash string // manifest + executable + config: a change restarts it
}

// Jail builds confined command lines (*sandbox.Jail).
type Jail interface {
	Command(req sandbox.Request, caps sandbox.Caps) (argv, env []string, err error)
}

// Servers is the MCP manager plugins are connected through.
type Servers interface {
	Add(spec mcp.Spec)
	Remove(id string)
	Get(id string) (mcp.ServerStatus, bool)
	Spec(id string) (mcp.Spec, bool)
}

// Registry keeps the plugins of some folders running.
type Registry struct {
	Dirs    []string
	Config  map[string]any // plugins_config
	Jail    Jail
	Caps    sandbox.Caps
	WorkDir string // per-plugin work folders: WorkDir/<id>
	Servers Servers
	Log     *slog.Logger

	mu      sync.Mutex
	plugins map[string]*Plugin // id -> loaded (or invalid, by folder)
	invalid []*Plugin
}

// Scan reads every plugin folder (a direct subfolder of a dir holding
// plugin.yaml); invalid ones carry Error.
func Scan(dirs []string) []*Plugin {
	var out []*Plugin
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue // a missing dir holds no plugins
		}
		for _, e := range entries {
			dir := filepath.Join(d, e.Name())
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, ManifestName)); err != nil {
				continue
			}
			out = append(out, Load(dir))
		}
	}
	return out
}

// Load reads and checks one plugin folder.
func Load(dir string) *Plugin {
	p := &Plugin{Dir: dir}
	fail := func(format string, args ...any) *Plugin {
		p.Status, p.Error = "invalid", fmt.Sprintf("plugin %s: ", dir)+fmt.Sprintf(format, args...)
		return p
	}
	raw, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return fail("%v", err)
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	if err := dec.Decode(&p.Manifest); err != nil {
		return fail("%s: %v", ManifestName, err)
	}
	if !mcp.ValidID(p.ID) {
		return fail("id %q must be 1-40 lower-case letters, digits, _ or -, start with a letter or digit and not contain __", p.ID)
	}
	if p.Version == "" {
		return fail("version is required")
	}
	if p.Protocol == "" {
		p.Protocol = "mcp-stdio"
	}
	if p.Protocol != "mcp-stdio" {
		return fail("protocol %q is not supported (use mcp-stdio)", p.Protocol)
	}
	exe, err := executable(dir, p.Executable)
	if err != nil {
		return fail("executable %q: %v", p.Executable, err)
	}
	p.exe = exe
	return p
}

// executable resolves rel inside dir: relative, no "..", no symlink that
// leaves the folder, a regular executable file.
func executable(dir, rel string) (string, error) {
	if rel == "" {
		return "", errors.New("is required")
	}
	if filepath.IsAbs(rel) {
		return "", errors.New("must be relative to the plugin folder")
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", errors.New("escapes the plugin folder (..)")
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, clean))
	if errors.Is(err, fs.ErrNotExist) {
		return "", errors.New("does not exist in the plugin folder")
	}
	if err != nil {
		return "", err
	}
	if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("escapes the plugin folder (a symlink to %s)", real)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", errors.New("is not a regular file")
	}
	if st.Mode().Perm()&0o111 == 0 {
		return "", errors.New("is not executable (chmod +x)")
	}
	return real, nil
}

func (r *Registry) config(id string) string {
	v, ok := r.Config[id]
	if !ok || v == nil {
		return "{}"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "{}"
	}
	return string(b)
}

// spec is the MCP server of a valid plugin: the confined command line.
func (r *Registry) spec(p *Plugin) (mcp.Spec, error) {
	root, _ := filepath.EvalSymlinks(p.Dir)
	rel, _ := filepath.Rel(root, p.exe)
	inner := append([]string{Mount + "/" + filepath.ToSlash(rel)}, p.Args...)
	work := filepath.Join(r.WorkDir, p.ID)
	env := map[string]string{EnvConfig: r.config(p.ID), EnvID: p.ID, EnvDir: Mount}
	req := sandbox.Request{Argv: inner, Dir: work, Mounts: []sandbox.Mount{{Host: root, Sandbox: Mount}}, Env: env}
	caps := r.Caps
	caps.Network = false
	// RLIMIT_AS bounds address space, not memory: the Go (and JVM) runtimes
	// reserve far more than they use and die under a skill-sized limit.
	if caps.MemoryBytes < PluginAddressSpace {
		caps.MemoryBytes = PluginAddressSpace
	}
	argv, procEnv, err := r.Jail.Command(req, caps)
	if err != nil {
		return mcp.Spec{}, err
	}
	spec := mcp.Spec{ID: p.ID, Transport: mcp.TransportStdio, Command: argv[0], Args: argv[1:], Source: SourcePlugin}
	if procEnv != nil { // unconfined: the process gets the environment itself
		spec.Env = map[string]string{}
		for _, kv := range procEnv {
			k, v, _ := strings.Cut(kv, "=")
			spec.Env[k] = v
		}
	}
	return spec, nil
}

func (r *Registry) fingerprint(p *Plugin) string {
	h := sha256.New()
	raw, _ := os.ReadFile(filepath.Join(p.Dir, ManifestName))
	h.Write(raw)
	if st, err := os.Stat(p.exe); err == nil {
		fmt.Fprintf(h, "\x00%d\x00%d", st.Size(), st.ModTime().UnixNano())
	}
	h.Write([]byte("\x00" + r.config(p.ID)))
	return hex.EncodeToString(h.Sum(nil))
}

// Rescan loads new and changed plugins and stops removed ones. Two folders
// with one id: the first (in plugin_dirs order) wins, the other is invalid.
func (r *Registry) Rescan(ctx context.Context) {
	scanned := Scan(r.Dirs)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.plugins == nil {
		r.plugins = map[string]*Plugin{}
	}
	seen := map[string]bool{}
	var invalid []*Plugin
	for _, p := range scanned {
		if p.Error != "" {
			invalid = append(invalid, p)
			continue
		}
		if seen[p.ID] {
			p.Status, p.Error = "invalid", fmt.Sprintf("plugin %s: id %q is already used by another plugin folder", p.Dir, p.ID)
			invalid = append(invalid, p)
			continue
		}
		if spec, ok := r.Servers.Spec(p.ID); ok && spec.Source != SourcePlugin {
			p.Status, p.Error = "invalid", fmt.Sprintf("plugin %s: id %q is already an MCP server (%s)", p.Dir, p.ID, spec.Source)
			invalid = append(invalid, p)
			continue
		}
		seen[p.ID] = true
		p.hash = r.fingerprint(p)
		if old := r.plugins[p.ID]; old != nil && old.hash == p.hash && old.Dir == p.Dir {
			continue // unchanged: keep it running
		}
		spec, err := r.spec(p)
		if err != nil {
			p.Status, p.Error = "invalid", fmt.Sprintf("plugin %s: cannot be sandboxed: %v", p.ID, err)
			invalid = append(invalid, p)
			if r.plugins[p.ID] != nil {
				r.Servers.Remove(p.ID)
				delete(r.plugins, p.ID)
			}
			continue
		}
		r.Servers.Add(spec)
		r.plugins[p.ID] = p
		if r.Log != nil {
			r.Log.Info("plugin loaded", "plugin", p.ID, "version", p.Version, "dir", p.Dir)
		}
	}
	for id := range r.plugins {
		if !seen[id] {
			r.Servers.Remove(id)
			delete(r.plugins, id)
			if r.Log != nil {
				r.Log.Info("plugin removed", "plugin", id)
			}
		}
	}
	for _, p := range invalid {
		if r.Log != nil {
			r.Log.Warn("plugin not loaded", "err", p.Error)
		}
	}
	r.invalid = invalid
}

// Watch rescans every interval until ctx ends.
func (r *Registry) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.Rescan(ctx)
		}
	}
}

// List is every plugin, loaded and invalid, by id then folder.
func (r *Registry) List() []Plugin {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Plugin, 0, len(r.plugins)+len(r.invalid))
	for _, p := range r.plugins {
		c := *p
		st, ok := r.Servers.Get(p.ID)
		switch {
		case !ok:
			c.Status = "starting"
		case st.Status == "connected":
			c.Status, c.Offered = "running", st.Tools
		default:
			c.Status, c.Error = st.Status, st.Error
		}
		for _, t := range p.Tools {
			if c.Status == "running" && !contains(c.Offered, t) {
				c.Missing = append(c.Missing, t)
			}
		}
		out = append(out, c)
	}
	for _, p := range r.invalid {
		out = append(out, *p)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].ID != out[j].ID {
			return out[i].ID < out[j].ID
		}
		return out[i].Dir < out[j].Dir
	})
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
