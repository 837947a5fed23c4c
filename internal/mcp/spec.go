// Package mcp connects the gateway to MCP servers (stdio child processes and
// streamable HTTP endpoints) through the official Go SDK, keeps their tool
// lists current (on reconnect and on notifications/tools/list_changed) and
// offers their tools to agents as mcp__<server>__<tool>.
//
// Servers come from two places: the mcp: section of config.yaml (the
// operator's file) and PUT /api/v1/mcp/own/{id} (stored in the database,
// header and env values sealed like every other secret). Registrations
// through the API pass the edition and SSRF policies (policy.go).
package mcp

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/toolgrant"
)

// Transports.
const (
	TransportHTTP  = "http"
	TransportStdio = "stdio"
)

// Sources of a server definition.
const (
	SourceConfig = "config"
	SourceAPI    = "api"
)

// Spec is one MCP server. Header and env values are secrets: they are never
// returned by the API, never logged and sealed at rest.
type Spec struct {
	ID        string            `json:"id"`
	Transport string            `json:"transport"`
	URL       string            `json:"url,omitempty"`
	Headers   map[string]string `json:"headers,omitempty"`
	Command   string            `json:"command,omitempty"`
	Args      []string          `json:"args,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	// Source is config or api.
	Source string `json:"source"`
}

var headerNameRe = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// invalid is a bad server definition (400), naming the field; the message
// never holds a header or env value.
func invalid(field, format string, args ...any) error {
	return &fault.Invalid{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ValidID reports whether id can name a server (the rule is toolgrant's).
func ValidID(id string) bool { return toolgrant.ValidMCPServerID(id) }

// Validate checks the shape of a spec (not policy, not reachability).
func (s *Spec) Validate() error {
	if !ValidID(s.ID) {
		return invalid("id", "%q must be 1-40 lower-case letters, digits, _ or -, start with a letter or digit and not contain __", s.ID)
	}
	switch s.Transport {
	case TransportHTTP:
		if s.URL == "" {
			return invalid("url", "is required for the http transport")
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 {
			return invalid("transport", "http servers take url and headers, not command, args or env")
		}
		for name := range s.Headers {
			if !headerNameRe.MatchString(name) {
				return invalid("headers", "%q is not a valid header name", name)
			}
		}
	case TransportStdio:
		if s.Command == "" {
			return invalid("command", "is required for the stdio transport")
		}
		if s.URL != "" || len(s.Headers) > 0 {
			return invalid("transport", "stdio servers take command, args and env, not url or headers")
		}
		for name := range s.Env {
			if !envNameRe.MatchString(name) {
				return invalid("env", "%q is not a valid environment variable name", name)
			}
		}
	case "":
		return invalid("transport", "is required: http or stdio")
	default:
		return invalid("transport", "%q is not http or stdio", s.Transport)
	}
	return nil
}

// Redacted is the spec without secret values: header and env names only.
type Redacted struct {
	ID        string   `json:"id"`
	Transport string   `json:"transport"`
	URL       string   `json:"url,omitempty"`
	Headers   []string `json:"headers,omitempty"`
	Command   string   `json:"command,omitempty"`
	Args      []string `json:"args,omitempty"`
	Env       []string `json:"env,omitempty"`
	Source    string   `json:"source"`
}

// Redact drops the secret values.
func (s *Spec) Redact() Redacted {
	return Redacted{ID: s.ID, Transport: s.Transport, URL: s.URL, Headers: sortedKeys(s.Headers), Command: s.Command,
		Args: s.Args, Env: sortedKeys(s.Env), Source: s.Source}
}

func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}

// ParseConfig reads the mcp: section of config.yaml: a map of server id to
// {transport, url, headers, command, args, env}. A server without a
// transport is http when it has a url and stdio when it has a command.
func ParseConfig(section map[string]any) ([]Spec, error) {
	ids := slices.Collect(maps.Keys(section))
	sort.Strings(ids)
	var out []Spec
	var errs []error
	for _, id := range ids {
		m, ok := section[id].(map[string]any)
		if !ok {
			errs = append(errs, fmt.Errorf("mcp.%s: want a mapping with transport, url/headers or command/args/env", id))
			continue
		}
		s := Spec{ID: id, Source: SourceConfig}
		s.Transport, _ = m["transport"].(string)
		s.URL, _ = m["url"].(string)
		s.Command, _ = m["command"].(string)
		if s.Transport == "" {
			if s.URL != "" {
				s.Transport = TransportHTTP
			} else if s.Command != "" {
				s.Transport = TransportStdio
			}
		}
		var err error
		if s.Args, err = stringList(m["args"]); err != nil {
			errs = append(errs, fmt.Errorf("mcp.%s.args: %w", id, err))
			continue
		}
		if s.Headers, err = stringMap(m["headers"]); err != nil {
			errs = append(errs, fmt.Errorf("mcp.%s.headers: %w", id, err))
			continue
		}
		if s.Env, err = stringMap(m["env"]); err != nil {
			errs = append(errs, fmt.Errorf("mcp.%s.env: %w", id, err))
			continue
		}
		if err := s.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("mcp.%s: %w", id, err))
			continue
		}
		out = append(out, s)
	}
	return out, errors.Join(errs...)
}

func stringList(v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, errors.New("want a list of strings")
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		out = append(out, fmt.Sprint(x))
	}
	return out, nil
}

func stringMap(v any) (map[string]string, error) {
	if v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("want a mapping of names to strings")
	}
	out := make(map[string]string, len(m))
	for k, x := range m {
		out[k] = fmt.Sprint(x)
	}
	return out, nil
}

// secretValues are the header and env values (the secrets of a server).
func (s Spec) secretValues() []string {
	var out []string
	for _, m := range []map[string]string{s.Headers, s.Env} {
		for _, v := range m {
			out = append(out, v)
		}
	}
	return out
}
