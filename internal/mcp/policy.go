package mcp

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
)

// Editions (server.edition).
const (
	EditionPersonal = "personal"
	EditionTeam     = "team"
	EditionScale    = "scale"
)

// PolicyError is a registration the deployment's policy refuses (403).
type PolicyError struct {
	ServerID string
	Msg      string
}

func (e *PolicyError) Error() string { return fmt.Sprintf("mcp server %s: %s", e.ServerID, e.Msg) }

// Fault implements fault.Fault: 403 policy, naming the server.
func (e *PolicyError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindForbidden, Code: "policy", Message: e.Error(), Fields: map[string]any{"server": e.ServerID}}
}

// Policy decides which servers may be registered through the API and
// which HTTP destinations any server may reach.
type Policy struct {
	// Edition is server.edition: personal (default), team or scale.
	Edition string
	// ServersDir is the workspace's managed mcp-servers/ folder: the only
	// place a registered stdio command may resolve to.
	ServersDir string
	// SSRF applies to every HTTP server, from config or API.
	SSRF netguard.Policy
}

// CheckRegistration applies the edition policy to a server registered
// through the API. For stdio it returns the spec with Command replaced by
// the resolved executable (symlinks followed), so what runs is what was
// checked.
func (p Policy) CheckRegistration(s Spec) (Spec, error) {
	edition := p.Edition
	if edition == "" {
		edition = EditionPersonal
	}
	switch s.Transport {
	case TransportStdio:
		if edition != EditionPersonal {
			return s, &PolicyError{ServerID: s.ID, Msg: fmt.Sprintf("the %s edition does not allow stdio servers; register an https endpoint", edition)}
		}
		resolved, err := p.ResolveCommand(s.Command)
		if err != nil {
			return s, &PolicyError{ServerID: s.ID, Msg: err.Error()}
		}
		s.Command = resolved
	case TransportHTTP:
		u, err := url.Parse(s.URL)
		if err != nil || u.Host == "" {
			return s, invalid("url", "%q is not an absolute URL", s.URL)
		}
		if edition != EditionPersonal && u.Scheme != "https" {
			return s, &PolicyError{ServerID: s.ID, Msg: fmt.Sprintf("the %s edition allows https endpoints only", edition)}
		}
		if _, err := p.SSRF.CheckURL(s.URL); err != nil {
			return s, &PolicyError{ServerID: s.ID, Msg: err.Error()}
		}
	}
	return s, nil
}

// ResolveCommand finds a stdio server's executable inside ServersDir: a
// bare name or relative path is taken from there, an absolute path must
// point there; symlinks are followed and must stay inside.
func (p Policy) ResolveCommand(command string) (string, error) {
	if p.ServersDir == "" {
		return "", fmt.Errorf("no managed mcp-servers directory is configured")
	}
	dir, err := filepath.EvalSymlinks(p.ServersDir)
	if err != nil {
		return "", fmt.Errorf("managed directory %s: %v", p.ServersDir, err)
	}
	path := command
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", fmt.Errorf("command %q does not resolve inside %s: %v", command, p.ServersDir, unwrapPathError(err))
	}
	if !strings.HasPrefix(real, dir+string(filepath.Separator)) {
		return "", fmt.Errorf("command %q resolves to %s, outside the managed directory %s", command, real, p.ServersDir)
	}
	st, err := os.Stat(real)
	if err != nil {
		return "", fmt.Errorf("command %q: %v", command, unwrapPathError(err))
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("command %q (%s) is not an executable file", command, real)
	}
	return real, nil
}

func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
