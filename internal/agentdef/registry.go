package agentdef

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Registry holds the agent definitions found in a list of directories and
// reloads them when the files change, without a restart. A file that fails
// validation is reported (LoadErrors) and skipped; the other agents keep
// serving. When two files define the same id, the first directory wins.
type Registry struct {
	dirs []string
	log  *slog.Logger
	refs Refs

	mu       sync.RWMutex
	agents   map[string]*Definition
	errs     []error
	print    string
	onChange []func()
}

// NewRegistry loads the directories once. Missing directories are fine.
func NewRegistry(dirs []string, log *slog.Logger) *Registry {
	if log == nil {
		log = slog.Default()
	}
	r := &Registry{dirs: dirs, log: log, agents: map[string]*Definition{}}
	r.Reload()
	return r
}

// Dirs are the directories scanned, in priority order.
func (r *Registry) Dirs() []string { return r.dirs }

// Get returns an agent by id.
func (r *Registry) Get(id string) (*Definition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.agents[id]
	return d, ok
}

// List returns all agents sorted by id.
func (r *Registry) List() []*Definition {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Definition, 0, len(r.agents))
	for _, d := range r.agents {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// LoadErrors are the problems found by the last load.
func (r *Registry) LoadErrors() []error {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]error(nil), r.errs...)
}

// OnChange registers a callback run after a reload that changed anything.
func (r *Registry) OnChange(f func()) {
	r.mu.Lock()
	r.onChange = append(r.onChange, f)
	r.mu.Unlock()
}

// Reload reads every definition again. It returns the load errors.
func (r *Registry) Reload() []error {
	agents := map[string]*Definition{}
	var errs []error
	for _, f := range r.files() {
		data, err := os.ReadFile(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("read %s: %w", f, err))
			continue
		}
		d, err := ParseWith(data, f, r.Refs())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if prev, dup := agents[d.ID]; dup {
			errs = append(errs, fmt.Errorf("%s: id %q is already defined in %s; ignored", f, d.ID, prev.File))
			continue
		}
		agents[d.ID] = d
	}
	// Peers are checked across files (peers.go).
	skip, peerErrs := CheckPeers(agents)
	for id := range skip {
		delete(agents, id)
	}
	errs = append(errs, peerErrs...)
	for _, e := range errs {
		r.log.Warn("agent definition skipped", "err", e)
	}
	r.mu.Lock()
	r.agents, r.errs = agents, errs
	r.print = r.fingerprint()
	cbs := append([]func(){}, r.onChange...)
	r.mu.Unlock()
	for _, f := range cbs {
		f()
	}
	return errs
}

// Watch polls the directories and reloads on any change until ctx ends.
// Polling (rather than inotify) also sees network filesystems and editors
// that replace files by rename.
func (r *Registry) Watch(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.mu.RLock()
			old := r.print
			r.mu.RUnlock()
			if r.fingerprint() != old {
				r.log.Info("agent definitions changed; reloading")
				r.Reload()
			}
		}
	}
}

// files lists definition files in priority order. A file reached twice (a
// directory listed again in agent_dirs, or through a symlink) is listed
// once: it is one definition, not a duplicate of itself.
func (r *Registry) files() []string {
	var out []string
	seen := map[string]bool{}
	for _, dir := range r.dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || strings.HasPrefix(name, ".") {
				continue
			}
			if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
				f := filepath.Join(dir, name)
				if real := realPath(f); !seen[real] {
					seen[real] = true
					out = append(out, f)
				}
			}
		}
	}
	return out
}

// realPath is the absolute path of f with symlinks resolved (f itself
// when that fails), to tell whether two names are one file.
func realPath(f string) string {
	if real, err := filepath.EvalSymlinks(f); err == nil {
		f = real
	}
	if abs, err := filepath.Abs(f); err == nil {
		f = abs
	}
	return f
}

func (r *Registry) fingerprint() string {
	var b strings.Builder
	for _, f := range r.files() {
		st, err := os.Stat(f)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s|%d|%d\n", f, st.Size(), st.ModTime().UnixNano())
	}
	return b.String()
}
