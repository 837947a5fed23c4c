// Package temporalconn opens the SDK client to the Temporal cluster the
// configuration names (or to the embedded server's address).
package temporalconn

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	tlog "go.temporal.io/sdk/log"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/telemetry"
)

// Dial connects to address (host:port) with the TLS and API key settings of
// cfg, waiting up to a bound for the frontend to answer.
func Dial(ctx context.Context, cfg config.TemporalConfig, address string, logger *slog.Logger) (client.Client, error) {
	tracing, err := telemetry.TemporalTracing()
	if err != nil {
		return nil, fmt.Errorf("temporal tracing interceptor: %w", err)
	}
	opts := client.Options{
		HostPort:  address,
		Namespace: cfg.Namespace,
		Logger:    tlog.NewStructuredLogger(quiet(logger)),
		// Workers made from this client use the interceptor too.
		Interceptors:   []interceptor.ClientInterceptor{tracing},
		MetricsHandler: telemetry.TemporalMetrics(),
		// Error texts are scrubbed of secrets before they enter history.
		FailureConverter: newScrubbingFailures(),
	}
	if loopback(address) {
		// The SDK gzips every request by default (and the server answers
		// in kind): over loopback that is CPU spent for nothing, about 3%
		// of a task run's in the load test of issue 10.
		opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
	}
	if cfg.TLS.Enabled || cfg.APIKey != "" {
		tc, err := tlsConfig(cfg.TLS)
		if err != nil {
			return nil, err
		}
		opts.ConnectionOptions.TLS = tc
	}
	if cfg.APIKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(cfg.APIKey)
	}
	dialCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var lastErr error
	for {
		c, err := client.DialContext(dialCtx, opts)
		if err == nil {
			return c, nil
		}
		lastErr = err
		select {
		case <-dialCtx.Done():
			return nil, fmt.Errorf("connect to Temporal at %s (namespace %s; set by temporal.address, AGENTRY_TEMPORAL_ADDRESS): %w", address, cfg.Namespace, lastErr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// loopback tells whether address (host:port) names this machine: the
// embedded server, or a local cluster.
func loopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func tlsConfig(c config.TLSConfig) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("temporal.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("temporal.tls.ca_file: no certificates in %s", c.CAFile)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}

// quiet keeps the SDK's chatty info logs out of the gateway log.
func quiet(l *slog.Logger) *slog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return slog.New(levelFloor{l.Handler(), slog.LevelWarn})
}

type levelFloor struct {
	slog.Handler
	min slog.Level
}

func (h levelFloor) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}
func (h levelFloor) WithAttrs(a []slog.Attr) slog.Handler {
	return levelFloor{h.Handler.WithAttrs(a), h.min}
}
func (h levelFloor) WithGroup(n string) slog.Handler {
	return levelFloor{h.Handler.WithGroup(n), h.min}
}
