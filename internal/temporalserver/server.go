// Package temporalserver runs a Temporal server (with its Web UI) inside the
// gateway process, persisted in a SQLite file, for installations without an
// external cluster and for tests.
//
// It is the only package that imports go.temporal.io/server: linking the
// server is slow and makes binaries large, so everything else talks to
// Temporal through the SDK. Search attribute names and temporal.yaml parsing
// live in the light subpackage temporaldefaults.
package temporalserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	"go.temporal.io/server/common/primitives"
	"go.temporal.io/server/temporal"
	"gopkg.in/yaml.v3"
)

const (
	// clusterName names the single-node cluster in Temporal's metadata.
	clusterName = "active"
	// stopTimeout bounds Stop; the gateway promises to exit within 10 s.
	stopTimeout = 8 * time.Second
	// configureTimeout bounds the namespace checks after the server is up.
	configureTimeout = 30 * time.Second
)

// Server is a running embedded Temporal server.
type Server struct {
	temporal     temporal.Server
	ui           *uiServer
	frontendAddr string
	uiAddr       string
	namespace    string
	logLevel     *serverLogLevel
	unlock       func() // releases the data directory

	stopOnce sync.Once
	stopErr  error
}

// FrontendAddress is the gRPC host:port SDK clients dial, e.g. "127.0.0.1:7233".
func (s *Server) FrontendAddress() string { return s.frontendAddr }

// UIAddress is the Web UI's host:port, or "" when the UI is disabled.
func (s *Server) UIAddress() string { return s.uiAddr }

// Namespace is the namespace Start created or checked.
func (s *Server) Namespace() string { return s.namespace }

// Start starts the server and returns once it accepts requests, the namespace
// exists with the wanted retention and search attributes, and the UI (if
// enabled) listens. A busy frontend or UI port is a *PortInUseError. A ctx
// cancelled while the services start is honoured once they have (about a
// second); ctx does not govern the running server, Stop ends it.
func Start(ctx context.Context, opts Options) (*Server, error) {
	began := time.Now()
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	level := &serverLogLevel{base: o.LogLevel}
	logger := quietLogger(o.Logger.With("component", "temporal"), level)
	dynConfig, err := dynamicConfigClient(o.DynamicConfig)
	if err != nil {
		return nil, err
	}

	// Public ports first: a busy one is the most likely failure and needs no
	// database work to report. The UI listener is held until the UI serves.
	if o.FrontendPort != 0 {
		if err := checkPortFree(o.Host, o.FrontendPort, FrontendPortKey); err != nil {
			return nil, err
		}
	}
	var uiLn net.Listener
	if o.UIEnabled {
		if uiLn, err = listen(o.Host, o.UIPort, UIPortKey); err != nil {
			return nil, err
		}
		defer func() {
			if uiLn != nil { // not handed over to the UI server
				_ = uiLn.Close()
			}
		}()
	}

	st, err := prepareStorage(ctx, o, logger)
	if err != nil {
		return nil, err
	}
	unlock := st.unlock
	defer func() {
		if unlock != nil { // not handed over to the Server
			unlock()
		}
	}()

	// Free ports for the frontend (when 0), its HTTP API and the internal
	// services, reserved together so they differ from each other. A port
	// picked here is free when picked, not when Temporal binds it: another
	// process can take it in between (many gateways starting at once on
	// one machine). Such a collision on a port picked here is retried with
	// new ones; a taken port the configuration named is not.
	var srv temporal.Server
	var p servicePorts
	for attempt := 1; ; attempt++ {
		ports, err := pickPorts(o.Host, 5)
		if err != nil {
			return nil, err
		}
		frontendPort := o.FrontendPort
		if frontendPort == 0 {
			frontendPort = ports[4]
		}
		p = servicePorts{frontend: frontendPort, frontendHTTP: ports[0], history: ports[1], matching: ports[2], worker: ports[3]}
		srv, err = startTemporal(ctx, o.Host, p, st, dynConfig, logger)
		if err == nil {
			break
		}
		if attempt >= 3 || !pickedPortTaken(err, p, o.FrontendPort) {
			return nil, err
		}
		o.Logger.Warn("embedded temporal: a port picked for it was taken meanwhile; picking others", "attempt", attempt)
	}
	frontendAddr := net.JoinHostPort(o.Host, strconv.Itoa(p.frontend))
	s := &Server{temporal: srv, frontendAddr: frontendAddr, namespace: o.Namespace, logLevel: level, unlock: unlock}
	unlock = nil

	if o.UIEnabled {
		ui, err := startUI(uiLn, frontendAddr, o.Namespace, logger)
		if err != nil {
			_ = s.Stop()
			return nil, err
		}
		s.ui, s.uiAddr, uiLn = ui, uiLn.Addr().String(), nil
	}

	cctx, cancel := context.WithTimeout(ctx, configureTimeout)
	defer cancel()
	if err := configureNamespace(cctx, frontendAddr, o, logger); err != nil {
		_ = s.Stop()
		return nil, err
	}

	o.Logger.Info("embedded temporal started",
		"frontend", s.frontendAddr, "ui", s.uiAddr, "namespace", s.namespace,
		"database", st.describe, "new_database", st.created, "took", time.Since(began).Round(time.Millisecond))
	return s, nil
}

// Stop stops the UI and the server. It is safe to call more than once (later
// calls return the first result) and returns within about 10 s; a server that
// does not stop in time is abandoned with an error.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		s.logLevel.stopping.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if s.ui != nil {
			uiCtx, uiCancel := context.WithTimeout(ctx, time.Second)
			s.ui.stop(uiCtx)
			uiCancel()
		}
		done := make(chan error, 1)
		go func() { done <- recoverFatal(s.temporal.Stop, "") }()
		select {
		case err := <-done:
			if err != nil {
				s.stopErr = fmt.Errorf("stop embedded temporal: %w", err)
			}
			s.unlock()
		case <-ctx.Done():
			// Keep the data directory locked: the server may still write.
			s.stopErr = fmt.Errorf("stop embedded temporal: not stopped after %s, abandoned", stopTimeout)
		}
	})
	return s.stopErr
}

type servicePorts struct {
	frontend, frontendHTTP, history, matching, worker int
}

// startTemporal builds and starts the server. Temporal's fatal logs panic
// (see slogLogger.Fatal); those raised while starting come back as errors.
func startTemporal(ctx context.Context, host string, p servicePorts, st storage, dyn dynamicconfig.Client, logger *slog.Logger) (temporal.Server, error) {
	frontendAddr := net.JoinHostPort(host, strconv.Itoa(p.frontend))
	hostPort := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	tlog := newTemporalLogger(logger)

	var srv temporal.Server
	err := recoverFatal(func() error {
		var err error
		srv, err = temporal.NewServer(
			temporal.WithConfig(serverConfig(host, p, st)),
			temporal.ForServices(temporal.DefaultServices),
			// One process hosts every service: resolve them statically instead
			// of running the ringpop membership protocol on more ports.
			temporal.WithStaticHosts(map[primitives.ServiceName]static.Hosts{
				primitives.FrontendService: static.SingleLocalHost(frontendAddr),
				primitives.HistoryService:  static.SingleLocalHost(hostPort(p.history)),
				primitives.MatchingService: static.SingleLocalHost(hostPort(p.matching)),
				primitives.WorkerService:   static.SingleLocalHost(hostPort(p.worker)),
			}),
			temporal.WithLogger(tlog),
			temporal.WithNamespaceLogger(tlog),
			temporal.WithDynamicConfigClient(dyn),
		)
		return err
	}, frontendAddr)
	var portErr *PortInUseError
	if errors.As(err, &portErr) {
		return nil, portErr // the one-line message is the whole story
	}
	if err != nil {
		return nil, fmt.Errorf("create embedded temporal: %w", err)
	}

	// Start blocks until every service runs (under a second here; Temporal
	// bounds it at 15 s or more). It cannot be interrupted, so ctx is checked
	// after it returns: a half-started server would hold ports and the
	// database after Start had already returned.
	if err := recoverFatal(srv.Start, frontendAddr); err != nil {
		// Services that did start hold ports and goroutines.
		_ = recoverFatal(srv.Stop, "")
		if errors.As(err, &portErr) {
			return nil, portErr
		}
		return nil, fmt.Errorf("start embedded temporal: %w", err)
	}
	if err := ctx.Err(); err != nil {
		_ = recoverFatal(srv.Stop, "")
		return nil, fmt.Errorf("start embedded temporal: %w", err)
	}
	return srv, nil
}

// recoverFatal runs f and turns a fatal log raised inside it into an error;
// a gRPC listener that could not bind frontendAddr becomes *PortInUseError.
func recoverFatal(f func() error, frontendAddr string) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		fe, ok := r.(*fatalError)
		if !ok {
			panic(r)
		}
		err = fe
		for _, t := range fe.tags {
			if t.Key() == "address" && frontendAddr != "" && fmt.Sprint(t.Value()) == frontendAddr {
				err = &PortInUseError{Addr: frontendAddr, ConfigKey: FrontendPortKey}
			}
		}
	}()
	return f()
}

func serverConfig(host string, p servicePorts, st storage) *config.Config {
	hostPort := func(port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }
	service := func(grpcPort, httpPort int) config.Service {
		return config.Service{RPC: config.RPC{GRPCPort: grpcPort, HTTPPort: httpPort, BindOnIP: host}}
	}

	var c config.Config
	c.Global.Membership = config.Membership{MaxJoinDuration: 30 * time.Second, BroadcastAddress: host}
	c.Persistence = config.Persistence{
		DefaultStore:     "default",
		VisibilityStore:  "default", // SQLite: one file holds both
		NumHistoryShards: st.shards,
		DataStores:       map[string]config.DataStore{"default": {SQL: st.main}},
	}
	if st.visibility != nil {
		c.Persistence.VisibilityStore = "visibility"
		c.Persistence.DataStores["visibility"] = config.DataStore{SQL: st.visibility}
	}
	c.ClusterMetadata = &cluster.Config{
		EnableGlobalNamespace:    false,
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             hostPort(p.frontend),
				HTTPAddress:            hostPort(p.frontendHTTP),
			},
		},
	}
	c.DCRedirectionPolicy = config.DCRedirectionPolicy{Policy: "noop"}
	c.Services = map[string]config.Service{
		string(primitives.FrontendService): service(p.frontend, p.frontendHTTP),
		string(primitives.HistoryService):  service(p.history, 0),
		string(primitives.MatchingService): service(p.matching, 0),
		string(primitives.WorkerService):   service(p.worker, 0),
	}
	c.Archival.History.State = "disabled"
	c.Archival.Visibility.State = "disabled"
	c.NamespaceDefaults.Archival.History.State = "disabled"
	c.NamespaceDefaults.Archival.Visibility.State = "disabled"
	// The server's own system workers (schedules, batch jobs) dial this.
	c.PublicClient.HostPort = hostPort(p.frontend)
	return &c
}

// dynamicConfigClient validates the overrides against Temporal's registry of
// settings (unknown key, value of the wrong type) and returns them as a static
// client. Temporal itself would only warn and carry on with its default.
func dynamicConfigClient(values map[string]any) (dynamicconfig.Client, error) {
	client := make(dynamicconfig.StaticClient, len(values))
	var errs []error
	for _, key := range slices.Sorted(maps.Keys(values)) {
		// The loader's input is the dynamic config file format: a list of
		// constrained values; ours are unconstrained.
		doc, err := yaml.Marshal([]map[string]any{{"value": values[key]}})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		loader := &dynamicconfig.YamlLoader{}
		k := dynamicconfig.MakeKey(key)
		loader.LoadValue(k, doc)
		if err := errors.Join(append(loader.Errors, loader.Warnings...)...); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			continue
		}
		client[k] = loader.Map[k]
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("temporal dynamic config: %w", err)
	}
	return client, nil
}
