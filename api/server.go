// Package api is the HTTP interface: routing, authentication, the error
// envelope, request validation and SSE. Handlers are thin: parse, call one
// service method, encode.
package api

import (
	"context"
	"crypto/tls"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"strings"
	"time"
	"unicode"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/cors"
	"github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/google/uuid"

	"github.com/agentryhq/agentry/internal/audit"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/telemetry"
)

// Prefix is the versioned API path.
const Prefix = "/api/v1"

// HealthCheck reports one dependency's health; nil means healthy.
type HealthCheck func(ctx context.Context) error

// Deps is what the API is built from. Feature services are optional: a nil
// service leaves its routes answering 503.
type Deps struct {
	Config  *config.Loaded
	Auth    auth.Authenticator
	Logger  *slog.Logger
	Version string
	// Health checks by name (database, temporal, ...): the dependencies
	// without which the gateway cannot work. One failing makes /health,
	// /health/live and /health/ready answer 503 "degraded".
	Health map[string]HealthCheck
	// Details add a line of what a check (Health or Warnings) found to its
	// entry, ok or not (sandbox: the isolation in force).
	Details map[string]func() string
	// Warnings are alerting checks (costs: accounting attribution below
	// 100 %) that do not take the gateway out of service: a failing one is
	// reported with status "warn" (or "acknowledged") by /health and
	// /health/ready, which still answer 200 (docs/operations.md, "Health").
	Warnings map[string]HealthCheck
	// Features register their routes on the authenticated /api/v1 group.
	Features []Feature
	// Public register routes outside /api/v1 without the gateway's
	// authentication: platform callbacks (/ingress/{channel id}), each
	// verified by the platform's own scheme.
	Public []Feature
	// OpenAI registers the OpenAI-compatible routes on /v1 (outside
	// /api/v1, behind the same authentication; errors in OpenAI's
	// envelope). MCPServer registers the gateway's own MCP server on /mcp,
	// behind the same authentication. Either may be nil.
	OpenAI    Feature
	MCPServer Feature
	// Audit receives the audit lines (nil: runtime.audit_log is off).
	Audit *audit.Log
	// Console is the operator console's file tree, served at / and
	// /console/*; nil serves none (server.gui off).
	Console fs.FS
	// ConsoleConnect are further origins the console may connect to (the
	// voice provider's realtime WebSocket, docs/voice.md).
	ConsoleConnect []string
	// StorageFull is told of every write refused for lack of space (the
	// database check then reports it; nil: nobody listens).
	StorageFull func()
}

// Feature is a group of routes with its own service. Its domain errors are
// faults (internal/fault), which api/errors.go maps for every feature.
type Feature interface {
	Register(r fiber.Router)
}

// Server is the HTTP server.
type Server struct {
	app  *fiber.App
	deps Deps
	log  *slog.Logger
	acks acks
}

// New builds the app and its routes.
func New(d Deps) *Server {
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	s := &Server{deps: d, log: d.Logger}
	bodyLimit := 4 << 20
	if d.Config != nil && d.Config.Server.MaxBodyBytes > 0 {
		bodyLimit = d.Config.Server.MaxBodyBytes
	}
	s.app = fiber.New(fiber.Config{
		DisableStartupMessage: true,
		BodyLimit:             bodyLimit,
		ErrorHandler:          s.errorHandler,
		ReadTimeout:           60 * time.Second,
		IdleTimeout:           120 * time.Second,
		// Streams (chat, events) write for as long as they run; no WriteTimeout.
		AppName: "agentry",
		// goccy/go-json writes what encoding/json writes, faster (see
		// TestResponseEncoderAgreesWithEncodingJSON).
		JSONEncoder: gojson.Marshal,
	})
	s.app.Use(recover.New())
	s.app.Use(s.requestID)
	s.app.Use(s.observe)
	s.app.Use(s.requestLog)
	if d.Config != nil && len(d.Config.Server.CORS.AllowOrigins) > 0 {
		s.app.Use(cors.New(cors.Config{
			AllowOrigins: strings.Join(d.Config.Server.CORS.AllowOrigins, ","),
			AllowHeaders: "Authorization, Content-Type, Idempotency-Key, Last-Event-ID",
			AllowMethods: "GET,POST,PUT,PATCH,DELETE,OPTIONS",
		}))
	}
	s.app.Get("/health", s.health)
	s.app.Get("/health/ready", s.health)
	s.app.Get("/health/live", s.live)
	s.registerMetrics()
	if d.Console != nil {
		s.mountConsole(d.Console, d.ConsoleConnect...)
	}
	for _, f := range d.Public {
		f.Register(s.app)
	}
	v1 := s.app.Group(Prefix, s.authenticate)
	v1.Get("/whoami", s.whoami)
	v1.Get("/logs/audit", s.auditTail)
	v1.Post("/health/checks/:name/acknowledge", s.acknowledge)
	for _, f := range d.Features {
		f.Register(v1)
	}
	// Anything else under the prefix (after authentication): 404 envelope.
	v1.Use(func(c *fiber.Ctx) error { return notFound("no such route: %s %s", c.Method(), c.Path()) })
	if d.OpenAI != nil {
		compat := s.app.Group(OpenAIPrefix, s.authenticate)
		d.OpenAI.Register(compat)
		compat.Use(func(c *fiber.Ctx) error { return notFound("no such route: %s %s", c.Method(), c.Path()) })
	}
	if d.MCPServer != nil {
		d.MCPServer.Register(s.app.Group(MCPServerPath, s.authenticate))
	}
	return s
}

// App exposes the Fiber app (tests use App().Test and route listing).
func (s *Server) App() *fiber.App { return s.app }

// Serve answers on ln until Shutdown. With server.tls it serves HTTPS.
func (s *Server) Serve(ln net.Listener) error {
	if c := s.deps.Config; c != nil && c.Server.TLS.Enabled {
		cert, err := tls.LoadX509KeyPair(c.Server.TLS.CertFile, c.Server.TLS.KeyFile)
		if err != nil {
			return fmt.Errorf("server.tls: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
	}
	return s.app.Listener(lingerListener{ln})
}

// Shutdown stops accepting and waits for in-flight requests up to ctx.
func (s *Server) Shutdown(ctx context.Context) error { return s.app.ShutdownWithContext(ctx) }

const headerRequestID = "X-Request-ID"

func (s *Server) requestID(c *fiber.Ctx) error {
	id := c.Get(headerRequestID)
	if id == "" || len(id) > 128 {
		id = uuid.NewString()
	}
	c.Locals("request_id", id)
	c.Set(headerRequestID, id)
	return c.Next()
}

// requestLog writes one line per request. It never logs headers or bodies,
// so credentials and prompts stay out of logs.
func (s *Server) requestLog(c *fiber.Ctx) error {
	start := time.Now()
	if err := c.Next(); err != nil {
		// Render the envelope now so the status logged is the one sent.
		if herr := s.errorHandler(c, err); herr != nil {
			return herr
		}
	}
	status := c.Response().StatusCode()
	level := slog.LevelInfo
	if status >= 500 {
		level = slog.LevelWarn
	}
	if !s.log.Enabled(c.UserContext(), level) {
		return nil // the line's attributes cost a dozen allocations: not for a line nobody keeps
	}
	attrs := []any{"method", c.Method(), "path", c.Path(), "status", status,
		"duration_ms", float64(time.Since(start).Microseconds()) / 1000, "request_id", c.Locals("request_id")}
	if tid := telemetry.TraceID(c.UserContext()); tid != "" {
		attrs = append(attrs, "trace_id", tid)
	}
	if p, ok := c.Locals("principal").(*auth.Principal); ok {
		attrs = append(attrs, "subject", p.Subject)
	}
	s.log.Log(c.UserContext(), level, "http request", attrs...)
	return nil
}

// authenticate guards every /api/v1 route.
func (s *Server) authenticate(c *fiber.Ctx) error {
	if c.Method() == fiber.MethodOptions {
		return c.Next()
	}
	token, ok := bearerToken(c.Get(fiber.HeaderAuthorization))
	if !ok || s.deps.Auth == nil {
		return unauthorized()
	}
	p, err := s.deps.Auth.Authenticate(c.UserContext(), token)
	if err != nil {
		return unauthorized()
	}
	c.Locals("principal", p)
	c.SetUserContext(auth.WithPrincipal(c.UserContext(), p))
	return c.Next()
}

func unauthorized() *Error {
	return &Error{Status: fiber.StatusUnauthorized, Message: "missing or invalid credentials: send your API key as a Bearer token in the Authorization header", Code: "unauthenticated"}
}

// Principal returns the authenticated caller of a request.
func Principal(c *fiber.Ctx) *auth.Principal {
	p, _ := c.Locals("principal").(*auth.Principal)
	return p
}

// Require answers 403 unless the caller holds perm.
func Require(c *fiber.Ctx, perm string) error {
	if !Principal(c).Can(perm) {
		return (&Error{Status: fiber.StatusForbidden, Message: fmt.Sprintf("permission %s required", perm), Code: "forbidden"})
	}
	return nil
}

func (s *Server) whoami(c *fiber.Ctx) error { return c.JSON(Principal(c)) }

// bearerToken reads "Bearer <credential>" (RFC 6750 / 7235): the scheme is
// case-insensitive. Every ASCII blank (space or horizontal tab) is treated
// alike: any run of them before the scheme, between scheme and credential,
// and after the credential is ignored (fasthttp already drops trailing
// spaces, so a trailing tab was the one refused — #42). Whitespace inside
// the credential, and any other space character around it (NBSP, line
// breaks, Unicode spaces), makes it no key: it is not trimmed, since a key
// never contains one.
func bearerToken(h string) (string, bool) {
	h = strings.Trim(h, asciiBlanks)
	i := strings.IndexAny(h, asciiBlanks)
	if i < 0 || !strings.EqualFold(h[:i], "Bearer") {
		return "", false
	}
	token := strings.TrimLeft(h[i:], asciiBlanks)
	if token == "" || strings.IndexFunc(token, unicode.IsSpace) >= 0 || strings.ContainsRune(token, '\u00a0') {
		return "", false
	}
	return token, true
}

// asciiBlanks are the blanks HTTP allows around header values (RFC 9110
// OWS: SP and HTAB).
const asciiBlanks = " \t"
