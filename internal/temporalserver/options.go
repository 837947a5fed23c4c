package temporalserver

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	enums "go.temporal.io/api/enums/v1"

	"github.com/agentryhq/agentry/internal/temporalserver/temporaldefaults"
)

// Config keys (and their environment variables) that move the embedded
// server's public ports; named in PortInUseError so users know what to change.
const (
	FrontendPortKey = "temporal.embedded.frontend_port"
	UIPortKey       = "temporal.embedded.ui_port"
)

// Fallbacks for zero Options fields. Ports have none: 0 means "pick a free
// port"; LoadDefaults supplies 7233 and 8233 from temporal.yaml.
const (
	defaultHost      = "127.0.0.1"
	defaultNamespace = "default"
	defaultRetention = 72 * time.Hour
)

// Options configure the embedded server. Start it from LoadDefaults and
// override what config.yaml sets.
type Options struct {
	// DataDir is a directory; the SQLite file temporal.db lives there, so
	// workflow history survives restarts. Required unless Postgres is set.
	// Created if missing.
	DataDir string
	// Postgres, when set, keeps persistence and visibility in PostgreSQL
	// instead of the SQLite file (the scale topology's Temporal).
	Postgres *Postgres
	// Host is the IP every port binds to. Default 127.0.0.1.
	Host string
	// FrontendPort is the gRPC port clients dial. 0 picks a free port.
	FrontendPort int
	// UIPort is the Web UI's HTTP port. 0 picks a free port.
	UIPort    int
	UIEnabled bool
	// Namespace is created if missing. Default "default".
	Namespace string
	// Retention of closed workflows, applied when the namespace is created and
	// re-applied on start if it differs. Default 72h; Temporal's minimum is 24h.
	Retention time.Duration
	// SearchAttributes are registered on the namespace; existing ones are kept
	// (idempotent). An existing attribute of another type is an error. nil
	// means DefaultSearchAttributes; an empty map registers none.
	SearchAttributes map[string]enums.IndexedValueType
	// DynamicConfig overrides Temporal dynamic config keys with plain values.
	// Unknown keys and values of the wrong type are an error.
	DynamicConfig map[string]any
	// Logger receives Temporal's own logs. Default slog.Default().
	Logger *slog.Logger
	// LogLevel is the least severe level of Temporal's logs that reaches
	// Logger. Default warn: Temporal is chatty at info.
	LogLevel slog.Leveler
}

// PortInUseError reports that a public port of the embedded server is taken,
// and which config key moves it.
type PortInUseError struct {
	Addr      string // host:port that is busy
	ConfigKey string // e.g. temporal.embedded.frontend_port
}

func (e *PortInUseError) Error() string {
	what := "frontend"
	if e.ConfigKey == UIPortKey {
		what = "UI"
	}
	return fmt.Sprintf("temporal %s address %s is already in use; set %s (%s) to a free port",
		what, e.Addr, e.ConfigKey, envVarName(e.ConfigKey))
}

// DefaultSearchAttributes are the search attributes Agentry's workflows set:
// AgentryTaskID (Int), AgentryAgentID (Keyword), AgentryTrigger (Keyword).
// Packages that must not link the server use temporaldefaults directly.
func DefaultSearchAttributes() map[string]enums.IndexedValueType {
	return temporaldefaults.SearchAttributes()
}

// LoadDefaults returns the Options of temporal.yaml (compiled into the
// binary): namespace, retention, host, ports, UI switch, search attributes and
// dynamic config. DataDir and Logger are left for the caller.
func LoadDefaults() (Options, error) {
	f, err := temporaldefaults.Load()
	if err != nil {
		return Options{}, err
	}
	attrs, err := f.ParsedSearchAttributes()
	if err != nil {
		return Options{}, err
	}
	return Options{
		Host:             f.Embedded.Host,
		FrontendPort:     f.Embedded.FrontendPort,
		UIPort:           f.Embedded.UIPort,
		UIEnabled:        f.Embedded.UIEnabled,
		Namespace:        f.Namespace,
		Retention:        f.Retention,
		SearchAttributes: attrs,
		DynamicConfig:    f.DynamicConfig,
	}, nil
}

// withDefaults fills zero fields and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.Host == "" {
		o.Host = defaultHost
	}
	if o.Namespace == "" {
		o.Namespace = defaultNamespace
	}
	if o.Retention == 0 {
		o.Retention = defaultRetention
	}
	if o.SearchAttributes == nil {
		o.SearchAttributes = DefaultSearchAttributes()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.LogLevel == nil {
		o.LogLevel = slog.LevelWarn
	}

	var errs []error
	if o.DataDir == "" && o.Postgres == nil {
		errs = append(errs, errors.New("data directory is required"))
	}
	if o.Postgres != nil {
		p := *o.Postgres
		if p.HistoryShards == 0 {
			p.HistoryShards = defaultPostgresShards
		}
		if p.HistoryShards < 1 || p.HistoryShards > 16384 {
			errs = append(errs, fmt.Errorf("%s: %d is not a shard count (1..16384)", HistoryShardsKey, p.HistoryShards))
		}
		o.Postgres = &p
	}
	// Temporal binds its services by IP, and broadcasts that IP to itself.
	if ip := net.ParseIP(o.Host); ip == nil {
		errs = append(errs, fmt.Errorf("host %q is not an IP address", o.Host))
	} else if ip.IsUnspecified() {
		errs = append(errs, fmt.Errorf("host %q: bind to a concrete IP (the server dials itself on it)", o.Host))
	}
	for key, port := range map[string]int{FrontendPortKey: o.FrontendPort, UIPortKey: o.UIPort} {
		if port < 0 || port > 65535 {
			errs = append(errs, fmt.Errorf("%s: %d is not a port number", key, port))
		}
	}
	if o.UIEnabled && o.UIPort != 0 && o.UIPort == o.FrontendPort {
		errs = append(errs, fmt.Errorf("%s and %s are both %d", FrontendPortKey, UIPortKey, o.UIPort))
	}
	if o.Retention < 24*time.Hour {
		errs = append(errs, fmt.Errorf("retention %s is shorter than Temporal's minimum of 24h", o.Retention))
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, fmt.Errorf("embedded temporal options: %w", err)
	}
	return o, nil
}
