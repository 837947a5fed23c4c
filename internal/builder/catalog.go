package builder

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"gopkg.in/yaml.v3"
)

// Catalog is what exists on this gateway and may be named in a definition
// the builder writes: the model is shown it, and every draft is checked
// against it. A definition naming anything else is refused (NotAllowedError).
type Catalog struct {
	// Providers maps each allowed provider id to its allowed models. An
	// empty model list means the provider lists none (any model the
	// workspace allowlist llm.allowed_models admits).
	Providers map[string][]string `json:"providers"`
	// AllowedModels is llm.allowed_models (empty: no workspace model allowlist).
	AllowedModels []string `json:"allowed_models,omitempty"`
	// DefaultProvider and DefaultModel are used when a draft names none.
	DefaultProvider string `json:"default_provider"`
	DefaultModel    string `json:"default_model,omitempty"`
	// Tools are the builtin tools an agent may list under builtins.
	Tools []string `json:"tools"`
	// MCPServers, KnowledgeBases, Channels, Skills and Agents (possible
	// peers) are the ids configured or loaded on this gateway.
	MCPServers     []string `json:"mcp_servers"`
	KnowledgeBases []string `json:"knowledge_bases"`
	Channels       []string `json:"channels"`
	Skills         []string `json:"skills"`
	Agents         []string `json:"agents"`
}

// CatalogFromConfig is the part of the catalog config.yaml tells: the
// providers and models the allowlists admit, the builtin tools (and those
// of drivers built in), the knowledge bases and the channels. MCP servers,
// skills and agents are added by the caller from the live registries.
func CatalogFromConfig(c *config.Config) Catalog {
	cat := Catalog{Providers: map[string][]string{}, AllowedModels: slices.Clone(c.LLM.AllowedModels), DefaultProvider: c.LLM.DefaultProvider}
	for id, p := range c.LLM.Providers {
		if len(c.LLM.AllowedProviders) > 0 && !slices.Contains(c.LLM.AllowedProviders, id) {
			continue
		}
		var models []string
		for _, m := range append([]string{p.DefaultModel}, p.Models...) {
			if m == "" || slices.Contains(models, m) {
				continue
			}
			if len(c.LLM.AllowedModels) > 0 && !slices.Contains(c.LLM.AllowedModels, m) {
				continue
			}
			models = append(models, m)
		}
		cat.Providers[id] = models
		if id == c.LLM.DefaultProvider {
			cat.DefaultModel = p.DefaultModel
		}
	}
	cat.Tools = slices.Clone(agentdef.KnownBuiltins)
	for _, d := range drivers.All() {
		for _, t := range d.Tools {
			cat.Tools = append(cat.Tools, t.Name)
		}
	}
	for id := range c.Knowledge.Bases {
		cat.KnowledgeBases = append(cat.KnowledgeBases, id)
	}
	for id, ch := range c.Channels.Messaging {
		if ch.Enabled {
			cat.Channels = append(cat.Channels, id)
		}
	}
	if c.Channels.Webhook.Enabled {
		cat.Channels = append(cat.Channels, "webhook")
	}
	cat.Sort()
	return cat
}

// Sort puts every list in order (the prompt and the answers are stable).
func (c *Catalog) Sort() {
	for _, l := range []*[]string{&c.Tools, &c.MCPServers, &c.KnowledgeBases, &c.Channels, &c.Skills, &c.Agents} {
		sort.Strings(*l)
		*l = slices.Compact(*l)
	}
}

// NotAllowedError is a draft naming something outside the catalog: 403
// not_allowed with the key and the offending name.
type NotAllowedError struct {
	Key  string // llm.provider, llm.model, builtins, mcp, knowledge, channels, skills, peers
	Name string
	// Known are the names that are allowed there.
	Known []string
}

func (e *NotAllowedError) Error() string {
	known := "none"
	if len(e.Known) > 0 {
		known = strings.Join(e.Known, ", ")
	}
	return fmt.Sprintf("the definition names %s %q, which is not allowed or does not exist on this gateway (allowed: %s)", e.Key, e.Name, known)
}

// Fault implements fault.Fault.
func (e *NotAllowedError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindForbidden, Code: "not_allowed", Message: e.Error(),
		Fields: map[string]any{"key": e.Key, "name": e.Name}}
}

// Check refuses a definition that names a provider, model, tool, MCP
// server, knowledge base, channel, skill or peer outside the catalog. The
// first offending name is reported.
func (c *Catalog) Check(d *agentdef.Definition) error {
	provider := d.LLM.Provider
	if provider == "" {
		provider = c.DefaultProvider
	}
	models, ok := c.Providers[provider]
	if !ok {
		return &NotAllowedError{Key: "llm.provider", Name: provider, Known: c.providerIDs()}
	}
	for _, p := range d.LLM.AllowedProviders {
		if _, ok := c.Providers[p]; !ok {
			return &NotAllowedError{Key: "llm.allowed_providers", Name: p, Known: c.providerIDs()}
		}
	}
	if m := d.LLM.Model; m != "" {
		if len(models) > 0 && !slices.Contains(models, m) || len(c.AllowedModels) > 0 && !slices.Contains(c.AllowedModels, m) {
			known := models
			if len(known) == 0 {
				known = c.AllowedModels
			}
			return &NotAllowedError{Key: "llm.model", Name: m, Known: known}
		}
	}
	for _, m := range d.LLM.AllowedModels {
		if len(c.AllowedModels) > 0 && !slices.Contains(c.AllowedModels, m) {
			return &NotAllowedError{Key: "llm.allowed_models", Name: m, Known: c.AllowedModels}
		}
	}
	for _, l := range []struct {
		key   string
		names []string
		known []string
		star  bool
	}{
		{"builtins", d.Builtins, c.Tools, false},
		{"mcp", d.MCP, c.MCPServers, true},
		{"knowledge", d.Knowledge, c.KnowledgeBases, false},
		{"channels", d.Channels, c.Channels, false},
		{"skills", d.Skills, c.Skills, false},
		{"peers", d.Peers, c.Agents, false},
	} {
		for _, n := range l.names {
			if l.star && n == "*" {
				continue
			}
			if !slices.Contains(l.known, n) {
				return &NotAllowedError{Key: l.key, Name: n, Known: l.known}
			}
		}
	}
	return nil
}

// parse reads a definition like a file on disk (agentdef.ParseWith) and
// checks it against the catalog. The names are checked first, on the bare
// YAML, so that a name outside the catalog is refused as such (403
// not_allowed naming it) even where the file rules would also refuse it
// (an unknown builtin).
func (c *Catalog) parse(text string) (*agentdef.Definition, error) {
	var bare agentdef.Definition
	if yaml.Unmarshal([]byte(text), &bare) == nil {
		if err := c.Check(&bare); err != nil {
			return nil, err
		}
	}
	def, err := agentdef.ParseWith([]byte(text), "definition", agentdef.Refs{KnowledgeBases: c.KnowledgeBases})
	if err != nil {
		return nil, err
	}
	if err := c.Check(def); err != nil {
		return nil, err
	}
	return def, nil
}

func (c *Catalog) providerIDs() []string {
	ids := make([]string, 0, len(c.Providers))
	for id := range c.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
