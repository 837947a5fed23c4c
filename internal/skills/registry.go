package skills

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/toolgrant"
)

// ToolPrefix starts every skill tool name: skill__<skill>__<tool>.
const ToolPrefix = toolgrant.SkillPrefix

// ToolName is the name the model sees for a skill's tool.
func ToolName(skill, tool string) string { return ToolPrefix + skill + "__" + tool }

// SplitToolName parses skill__<skill>__<tool>.
func SplitToolName(name string) (skill, tool string, ok bool) {
	rest, found := strings.CutPrefix(name, ToolPrefix)
	if !found {
		return "", "", false
	}
	skill, tool, ok = strings.Cut(rest, "__")
	return skill, tool, ok && skill != "" && tool != ""
}

// Grant is the tool-allowlist entry for every tool of a skill.
func Grant(skill string) string { return toolgrant.Skill(skill) }

// ErrNotFound: no skill of that name is loaded.
var ErrNotFound = fault.NotFound("skill not found")

// Registry holds the skills found in its folders (the workspace's skills/
// first, then skill_dirs; the first folder wins a name). Rescan reloads.
type Registry struct {
	dirs []string
	log  *slog.Logger
	// Runner runs tool scripts at call time.
	Runner Runner

	scanMu sync.Mutex // one rescan at a time
	mu     sync.RWMutex
	skills map[string]*Skill
}

// Refusal is a folder that was not loaded, and why.
type Refusal struct {
	Dir    string `json:"dir"`
	Name   string `json:"name,omitempty"`
	Reason string `json:"reason"`
}

// Report is what a rescan changed.
type Report struct {
	Added   []string  `json:"added"`
	Changed []string  `json:"changed"`
	Removed []string  `json:"removed"`
	Refused []Refusal `json:"refused"`
	Skills  int       `json:"skills"`
}

// NewRegistry builds a registry over dirs and loads them once.
func NewRegistry(dirs []string, log *slog.Logger) *Registry {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Registry{dirs: dirs, log: log, skills: map[string]*Skill{}, Runner: Runner{Timeout: 30 * time.Second}}
	r.Rescan()
	return r
}

// Dirs are the folders scanned, in priority order.
func (r *Registry) Dirs() []string { return r.dirs }

// Rescan loads every skill folder again and reports what changed. A folder
// that is refused keeps nothing loaded under its name.
func (r *Registry) Rescan() Report {
	r.scanMu.Lock()
	defer r.scanMu.Unlock()
	found := map[string]*Skill{}
	rep := Report{Added: []string{}, Changed: []string{}, Removed: []string{}, Refused: []Refusal{}}
	for _, d := range r.dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				rep.Refused = append(rep.Refused, Refusal{Dir: d, Reason: "cannot read the folder: " + err.Error()})
			}
			continue
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue // staging folders of installs, editor files
			}
			dir := filepath.Join(d, e.Name())
			if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
				continue
			}
			s, err := Load(dir)
			if err != nil {
				var re *RefusedError
				reason := err.Error()
				if errors.As(err, &re) {
					reason = re.Reason
				}
				rep.Refused = append(rep.Refused, Refusal{Dir: dir, Reason: reason})
				continue
			}
			if prev, dup := found[s.Name]; dup {
				rep.Refused = append(rep.Refused, Refusal{Dir: dir, Name: s.Name, Reason: "a skill named " + s.Name + " is already loaded from " + prev.Dir})
				continue
			}
			found[s.Name] = s
		}
	}
	r.mu.Lock()
	for name, s := range found {
		old, ok := r.skills[name]
		switch {
		case !ok:
			rep.Added = append(rep.Added, name)
		case old.Digest != s.Digest || old.Dir != s.Dir:
			rep.Changed = append(rep.Changed, name)
		}
	}
	for name := range r.skills {
		if _, ok := found[name]; !ok {
			rep.Removed = append(rep.Removed, name)
		}
	}
	r.skills = found
	r.mu.Unlock()
	for _, l := range [][]string{rep.Added, rep.Changed, rep.Removed} {
		sort.Strings(l)
	}
	rep.Skills = len(found)
	for _, f := range rep.Refused {
		r.log.Warn("skill folder refused", "dir", f.Dir, "reason", f.Reason)
	}
	return rep
}

// List is every loaded skill, by name.
func (r *Registry) List() []*Skill {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]*Skill, 0, len(r.skills))
	for _, s := range r.skills {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Names are the loaded skills' names.
func (r *Registry) Names() []string {
	var out []string
	for _, s := range r.List() {
		out = append(out, s.Name)
	}
	return out
}

// Get is one skill.
func (r *Registry) Get(name string) (*Skill, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.skills[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return s, nil
}

// pick are the loaded skills among names, in the order named; names that
// are not loaded are left out.
func (r *Registry) pick(names []string) []*Skill {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []*Skill
	for _, n := range names {
		if s, ok := r.skills[n]; ok && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// Instructions is the text added to the system prompt of an agent using
// the named skills.
func (r *Registry) Instructions(names []string) string {
	var b strings.Builder
	for _, s := range r.pick(names) {
		fmt.Fprintf(&b, "\n\n## Skill: %s\n%s\n", s.Name, s.Description)
		if s.Instructions != "" {
			b.WriteString("\n" + s.Instructions + "\n")
		}
		for _, t := range s.Tools {
			fmt.Fprintf(&b, "\nTool %s: %s", ToolName(s.Name, t.Name), t.Description)
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// Tools are the tool schemas of the named skills.
func (r *Registry) Tools(names []string) []llm.Tool {
	var out []llm.Tool
	for _, s := range r.pick(names) {
		for _, t := range s.Tools {
			out = append(out, llm.Tool{Name: ToolName(s.Name, t.Name), Description: t.Description, Parameters: t.Parameters})
		}
	}
	return out
}

// Result is a skill tool's answer; IsError marks a failed run, which the
// model reads like any result.
type Result struct {
	Content string
	IsError bool
}

// Call runs skill__<skill>__<tool> with JSON arguments.
func (r *Registry) Call(ctx context.Context, name string, args json.RawMessage) (Result, error) {
	skill, tool, ok := SplitToolName(name)
	if !ok {
		return Result{Content: fmt.Sprintf("%q is not a skill tool name (skill__<skill>__<tool>)", name), IsError: true}, nil
	}
	s, err := r.Get(skill)
	if err != nil {
		return Result{Content: fmt.Sprintf("skill %s is not loaded", skill), IsError: true}, nil
	}
	for _, t := range s.Tools {
		if t.Name == tool {
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			if !json.Valid(args) {
				return Result{Content: "arguments are not valid JSON", IsError: true}, nil
			}
			var out Outcome
			if r.Runner.Jail != nil {
				out = r.Runner.runConfined(ctx, s.Dir, t.Script, args, "", Granted(s))
			} else {
				out = r.Runner.Run(ctx, s.Dir, t.Script, args, false)
			}
			if errors.Is(ctx.Err(), context.Canceled) {
				return Result{}, ctx.Err() // the run was cancelled: not a result
			}
			return out.Result(), nil
		}
	}
	return Result{Content: fmt.Sprintf("skill %s has no tool %s", skill, tool), IsError: true}, nil
}
