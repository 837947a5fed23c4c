package agentry

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/agentryhq/agentry/internal/config"
)

// Environment variables of the client (besides every AGENTRY_* config
// override, which config.Load applies to the local configuration).
const (
	EnvGateway = "AGENTRY_GATEWAY"
	EnvAPIKey  = "AGENTRY_API_KEY"
	EnvContext = "AGENTRY_CONTEXT"
)

// Target is the gateway a command talks to, resolved once before it runs.
type Target struct {
	URL string `json:"gateway_url"`
	// URLFrom tells where URL came from: flag, env, context, config or default.
	URLFrom string `json:"gateway_url_from"`
	// Context is the selected context, if any.
	Context     string `json:"context,omitempty"`
	ContextFrom string `json:"context_from,omitempty"`
	APIKey      string `json:"-"`
	// KeyFrom tells where the API key came from ("" when there is none).
	KeyFrom string `json:"api_key_from,omitempty"`
	Local   bool   `json:"local"`
}

// Describe is "URL (from ...)" for messages.
func (t Target) Describe() string { return fmt.Sprintf("%s (from %s)", t.URL, t.URLFrom) }

// Inputs are what resolution reads, passed explicitly so tests can vary them.
type Inputs struct {
	FlagGateway, FlagAPIKey, FlagContext string
	Env                                  config.Env
	// Config is the local configuration; nil when it did not load.
	Config *config.Loaded
	// ConfigErr is why it did not load.
	ConfigErr error
}

// Resolve applies the precedence flags > environment > selected context >
// local configuration, separately for the URL and the key. The local
// fallbacks for the key (server.api_key, the workspace's generated key
// file) are only used for a local target: a remote gateway never receives
// the local admin key unless the user names it.
func Resolve(in Inputs) (Target, error) {
	env := in.Env
	if env == nil {
		env = config.OSEnv
	}
	get := func(k string) string { v, _ := env(k); return strings.TrimSpace(v) }
	var t Target

	// Context: --context > AGENTRY_CONTEXT > cli.active_context.
	var ctx *config.ContextConfig
	switch {
	case in.FlagContext != "":
		t.Context, t.ContextFrom = in.FlagContext, "--context"
	case get(EnvContext) != "":
		t.Context, t.ContextFrom = get(EnvContext), EnvContext
	case in.Config != nil && in.Config.CLI.ActiveContext != "":
		t.Context, t.ContextFrom = in.Config.CLI.ActiveContext, "cli.active_context"
	}
	if t.Context != "" {
		if in.Config == nil {
			return t, fmt.Errorf("context %q (from %s): cannot read the local configuration: %w", t.Context, t.ContextFrom, in.ConfigErr)
		}
		c, ok := in.Config.CLI.Contexts[t.Context]
		if !ok {
			return t, usagef("context %q (from %s) does not exist; known contexts: %s", t.Context, t.ContextFrom, knownContexts(in.Config))
		}
		ctx = &c
	}

	// URL.
	switch {
	case in.FlagGateway != "":
		t.URL, t.URLFrom = in.FlagGateway, "--gateway"
	case get(EnvGateway) != "":
		t.URL, t.URLFrom = get(EnvGateway), EnvGateway
	case ctx != nil && ctx.GatewayURL != "":
		t.URL, t.URLFrom = ctx.GatewayURL, "context "+t.Context
	case in.Config == nil:
		return t, fmt.Errorf("no gateway given (--gateway, %s or a context) and the local configuration does not load: %w", EnvGateway, in.ConfigErr)
	case in.Config.CLI.GatewayURL != "":
		t.URL, t.URLFrom = in.Config.CLI.GatewayURL, "cli.gateway_url"
	default:
		t.URL, t.URLFrom = LocalURL(&in.Config.Config), "server.host/server.port"
	}
	t.URL = strings.TrimRight(t.URL, "/")
	if err := checkURL(t.URL); err != nil {
		return t, usagef("gateway URL %q (from %s): %v", t.URL, t.URLFrom, err)
	}
	t.Local = IsLocal(t.URL)

	// Key.
	switch {
	case in.FlagAPIKey != "":
		t.APIKey, t.KeyFrom = in.FlagAPIKey, "--api-key"
	case get(EnvAPIKey) != "":
		t.APIKey, t.KeyFrom = get(EnvAPIKey), EnvAPIKey
	case ctx != nil && ctx.APIKey != "":
		t.APIKey, t.KeyFrom = ctx.APIKey, "context "+t.Context
	case !t.Local || in.Config == nil:
	case in.Config.Server.APIKey != "":
		t.APIKey, t.KeyFrom = in.Config.Server.APIKey, "server.api_key"
	default:
		path := in.Config.Workspace.APIKeyFile()
		if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) != "" {
			t.APIKey, t.KeyFrom = strings.TrimSpace(string(data)), path
		}
	}
	return t, nil
}

func knownContexts(cfg *config.Loaded) string {
	if cfg == nil || len(cfg.CLI.Contexts) == 0 {
		return "(none; add one with `agentry context add NAME --gateway URL`)"
	}
	names := make([]string, 0, len(cfg.CLI.Contexts))
	for n := range cfg.CLI.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// LocalURL is the gateway of the local configuration: server.host (a
// wildcard address is reached on loopback) and server.port.
func LocalURL(cfg *config.Config) string {
	host := cfg.Server.Host
	switch host {
	case "", "0.0.0.0", "::", "[::]":
		host = "127.0.0.1"
	}
	scheme := "http"
	if cfg.Server.TLS.Enabled {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(strings.Trim(host, "[]"), strconv.Itoa(cfg.Server.Port))
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return errors.New("no host")
		}
		return nil
	case "unix":
		if u.Path == "" && u.Opaque == "" {
			return errors.New("a unix URL names a socket path, e.g. unix:///run/agentry.sock")
		}
		return nil
	}
	return errors.New("use http://host:port, https://host:port or unix:///path/to/socket")
}

// IsLocal reports whether a gateway URL is on this machine: a Unix socket,
// localhost (and *.localhost) or a loopback IP. Everything else, including
// this machine's own non-loopback addresses, counts as remote: the client
// cannot know that a name resolves here, and refusing is the safe side.
func IsLocal(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if u.Scheme == "unix" {
		return true
	}
	host := strings.ToLower(u.Hostname())
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
