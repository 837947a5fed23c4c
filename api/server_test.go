package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

const testKey = "test-admin-key"

func newTestServer(t *testing.T, mutate func(*Deps)) *Server {
	t.Helper()
	cfg := &config.Loaded{Config: config.Defaults()}
	cfg.Server.MaxBodyBytes = 1024
	cfg.Server.CORS.AllowOrigins = []string{"https://ui.example"}
	d := Deps{
		Config: cfg,
		Auth:   auth.NewKeyAuthenticator([]auth.APIKey{{Key: testKey, Subject: "admin", Role: auth.RoleAdmin}}),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Health: map[string]HealthCheck{"database": func(context.Context) error { return nil }},
	}
	if mutate != nil {
		mutate(&d)
	}
	return New(d)
}

func do(t *testing.T, s *Server, req *http.Request) (int, map[string]any, http.Header) {
	t.Helper()
	resp, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	return resp.StatusCode, body, resp.Header
}

// AssertEveryRouteNeedsAuth walks every registered /api/v1 route and proves
// it answers 401 with the envelope without credentials and with a wrong key.
// Feature packages call it on a server with all features mounted.
func AssertEveryRouteNeedsAuth(t *testing.T, s *Server) {
	t.Helper()
	seen := 0
	for _, r := range s.App().GetRoutes(true) {
		if !strings.HasPrefix(r.Path, Prefix+"/") || r.Method == fiber.MethodHead || r.Method == fiber.MethodOptions || r.Method == "USE" {
			continue
		}
		seen++
		path := strings.NewReplacer(":id", "1", ":agent_id", "a", ":run_id", "1", ":name", "x").Replace(r.Path)
		path = strings.ReplaceAll(path, "*", "x")
		for _, header := range []string{"", "Bearer wrong-key", "Basic " + testKey, "Bearer "} {
			req := httptest.NewRequest(r.Method, path, strings.NewReader(`{}`))
			req.Header.Set("Content-Type", "application/json")
			if header != "" {
				req.Header.Set("Authorization", header)
			}
			status, body, _ := do(t, s, req)
			if status != http.StatusUnauthorized || body["error"] == nil {
				t.Errorf("%s %s with %q: status %d body %v, want 401 envelope", r.Method, r.Path, header, status, body)
			}
		}
	}
	if seen == 0 {
		t.Fatal("no /api/v1 routes registered")
	}
}

func TestEveryRouteNeedsAuth(t *testing.T) {
	AssertEveryRouteNeedsAuth(t, newTestServer(t, nil))
}

func TestAuthenticatedUnknownRouteIs404Envelope(t *testing.T) {
	s := newTestServer(t, nil)
	req := httptest.NewRequest("GET", "/api/v1/nope", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	status, body, _ := do(t, s, req)
	if status != 404 || body["error"] == nil {
		t.Fatalf("status %d body %v", status, body)
	}
	req = httptest.NewRequest("GET", "/api/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	status, body, _ = do(t, s, req)
	if status != 200 || body["subject"] != "admin" || body["role"] != "admin" {
		t.Fatalf("whoami: %d %v", status, body)
	}
}

// TestBodyLimitIs413Envelope uses real HTTP: the limit is enforced by the
// server while reading the request, before any handler.
func TestBodyLimitIs413Envelope(t *testing.T) {
	s := newTestServer(t, nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/api/v1/whoami", strings.NewReader(strings.Repeat("x", 4096)))
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || body["error"] == nil {
		t.Fatalf("status %d body %v", resp.StatusCode, body)
	}
}

func TestHealth(t *testing.T) {
	s := newTestServer(t, nil)
	status, body, _ := do(t, s, httptest.NewRequest("GET", "/health", nil))
	if status != 200 || body["status"] != "ok" {
		t.Fatalf("healthy: %d %v", status, body)
	}
	s = newTestServer(t, func(d *Deps) {
		d.Health["temporal"] = func(context.Context) error { return errors.New("unreachable") }
	})
	status, body, _ = do(t, s, httptest.NewRequest("GET", "/health", nil))
	if status != 503 || body["status"] != "degraded" {
		t.Fatalf("degraded: %d %v", status, body)
	}
}

func TestCORSAllowList(t *testing.T) {
	s := newTestServer(t, nil)
	req := httptest.NewRequest("OPTIONS", "/api/v1/whoami", nil)
	req.Header.Set("Origin", "https://ui.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	_, _, h := do(t, s, req)
	if h.Get("Access-Control-Allow-Origin") != "https://ui.example" {
		t.Fatalf("allowed origin not echoed: %v", h)
	}
	req = httptest.NewRequest("OPTIONS", "/api/v1/whoami", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Access-Control-Request-Method", "GET")
	_, _, h = do(t, s, req)
	if h.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign origin allowed: %v", h)
	}
}

// An error quoting a huge refused value stays small (it was as large as the
// value: a 3 MB source gave a 3 MB answer) and valid UTF-8.
func TestErrorEnvelopeCapsQuotedValues(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Features = []Feature{boom{}} })
	req := httptest.NewRequest("GET", "/api/v1/quoting", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	status, body, _ := do(t, s, req)
	msg, _ := body["error"].(string)
	if status != 400 || len(msg) > 1100 || !utf8.ValidString(msg) || !strings.HasPrefix(msg, `source "ééé`) || !strings.Contains(msg, "bytes cut") {
		t.Fatalf("%d %d bytes: %.200s", status, len(msg), msg)
	}
}

func TestErrorEnvelopeHidesInternalErrors(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Features = []Feature{boom{}} })
	req := httptest.NewRequest("GET", "/api/v1/boom", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	status, body, _ := do(t, s, req)
	if status != 500 || body["error"] != "internal error" {
		t.Fatalf("%d %v", status, body)
	}
	req = httptest.NewRequest("GET", "/api/v1/mapped", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	status, body, h := do(t, s, req)
	if status != 402 || body["code"] != "budget_exceeded" || h.Get("Retry-After") != "3" {
		t.Fatalf("%d %v %v", status, body, h)
	}
	// A full database write queue, however deep it is wrapped, sheds the
	// request with 503 and Retry-After.
	req = httptest.NewRequest("GET", "/api/v1/overloaded", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	status, body, h = do(t, s, req)
	if status != 503 || body["code"] != "overloaded" || h.Get("Retry-After") != "1" {
		t.Fatalf("%d %v %v", status, body, h)
	}
}

type boom struct{}

var errMapped = &fault.Error{Kind: fault.KindBudget, Code: "budget_exceeded", Msg: "budget", RetryAfter: 3e9}

func (boom) Register(r fiber.Router) {
	r.Get("/boom", func(c *fiber.Ctx) error { return errors.New("/secret/path: sql failure") })
	r.Get("/mapped", func(c *fiber.Ctx) error { return fmt.Errorf("%w", errMapped) })
	r.Get("/quoting", func(c *fiber.Ctx) error { return badRequest("source %q is not a URL", strings.Repeat("é", 1<<20)) })
	r.Get("/overloaded", func(c *fiber.Ctx) error {
		return fmt.Errorf("llm call: cost admission of call c1: write ledger row c1: %w", models.ErrOverloaded)
	})
}
