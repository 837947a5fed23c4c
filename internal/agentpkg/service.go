package agentpkg

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/agentryhq/agentry/internal/agentdef"
)

// Environment is what a gateway offers, for the missing-requirements
// check. Every function may be nil (nothing of that kind is known).
type Environment struct {
	Providers      func() []string
	Channels       func() []string
	Skills         func() []string
	MCPServers     func() []string
	KnowledgeBases func() []string
	Secrets        func(ctx context.Context) ([]string, error)
	// FileExists reports whether a workspace file the agent names exists.
	FileExists func(name string) bool
}

// Service exports, inspects and imports packages on a gateway.
type Service struct {
	Files *agentdef.Files
	Env   Environment
	// CreatedBy is written into exported packages ("agentry <version>").
	CreatedBy string
}

// Report is what inspect (and import) tell about a verified package.
type Report struct {
	AgentID      string       `json:"agent_id"`
	Checksum     string       `json:"checksum"`
	Signed       bool         `json:"signed"`
	KeyID        string       `json:"key_id,omitempty"`
	Files        []string     `json:"files"`
	Requirements Requirements `json:"requirements"`
	// Missing are the requirements the gateway does not provide.
	Missing Requirements `json:"missing"`
	// Exists tells whether an agent with that id is already defined.
	Exists bool `json:"exists"`
}

// Export builds the package of an agent (unsigned; the client signs it
// with a key that never leaves the client).
func (s *Service) Export(id string) (*Export, error) {
	def, ok := s.Files.Registry.Get(id)
	if !ok {
		return nil, fmt.Errorf("%w: %s", agentdef.ErrNotFound, id)
	}
	data, err := os.ReadFile(def.File)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", def.File, err)
	}
	return Build(data, agentdef.BundleDir(def), s.CreatedBy)
}

// Inspect verifies a package and reports what the gateway lacks.
func (s *Service) Inspect(ctx context.Context, doc []byte) (*Package, *Report, error) {
	p, err := Verify(doc, VerifyOptions{})
	if err != nil {
		return nil, nil, err
	}
	r, err := s.report(ctx, p)
	return p, r, err
}

// Import verifies a package and installs its agent, disabled unless
// enable is set; an existing id is refused unless overwrite is set.
func (s *Service) Import(ctx context.Context, doc []byte, enable, overwrite bool) (*agentdef.Definition, *Report, error) {
	p, r, err := s.Inspect(ctx, doc)
	if err != nil {
		return nil, nil, err
	}
	text, err := p.Definition()
	if err != nil {
		return nil, nil, err
	}
	text, err = agentdef.WithEnabled(text, enable)
	if err != nil {
		return nil, nil, err
	}
	files, err := p.FileContents()
	if err != nil {
		return nil, nil, err
	}
	def, err := s.Files.Install(text, files, overwrite)
	if err != nil {
		return nil, nil, err
	}
	r.Exists = true
	return def, r, nil
}

func (s *Service) report(ctx context.Context, p *Package) (*Report, error) {
	r := &Report{AgentID: p.AgentID(), Checksum: p.Checksum, Signed: p.Signature != nil, Requirements: p.Requirements, Files: []string{}}
	if p.Signature != nil {
		r.KeyID = p.Signature.KeyID
	}
	for _, f := range p.Files {
		r.Files = append(r.Files, f.Path)
	}
	_, r.Exists = s.Files.Registry.Get(r.AgentID)
	have := func(f func() []string) map[string]bool {
		m := map[string]bool{}
		if f != nil {
			for _, v := range f() {
				m[v] = true
			}
		}
		return m
	}
	var secretNames []string
	if s.Env.Secrets != nil {
		var err error
		if secretNames, err = s.Env.Secrets(ctx); err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
	}
	agents := map[string]bool{}
	for _, d := range s.Files.Registry.List() {
		agents[d.ID] = true
	}
	secretSet := map[string]bool{}
	for _, n := range secretNames {
		secretSet[n] = true
	}
	files := func(name string) bool { return s.Env.FileExists != nil && s.Env.FileExists(name) }
	req := p.Requirements
	r.Missing = Requirements{
		Providers:      missing(req.Providers, have(s.Env.Providers)),
		Channels:       missing(req.Channels, have(s.Env.Channels)),
		PeerAgents:     missing(req.PeerAgents, agents),
		Skills:         missing(req.Skills, have(s.Env.Skills)),
		MCPServers:     missing(req.MCPServers, have(s.Env.MCPServers)),
		KnowledgeBases: missing(req.KnowledgeBases, have(s.Env.KnowledgeBases)),
		Secrets:        missing(req.Secrets, secretSet),
		Files:          []string{},
	}
	for _, f := range req.Files {
		if !files(f) {
			r.Missing.Files = append(r.Missing.Files, f)
		}
	}
	return r, nil
}

func missing(want []string, have map[string]bool) []string {
	out := []string{}
	for _, w := range want {
		if !have[w] {
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// Count is the number of entries over all lists.
func (r Requirements) Count() int {
	return len(r.Providers) + len(r.Channels) + len(r.PeerAgents) + len(r.Skills) + len(r.MCPServers) +
		len(r.Files) + len(r.KnowledgeBases) + len(r.Secrets)
}
