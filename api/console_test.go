package api

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/agentryhq/agentry/internal/console"
)

func TestConsoleServedOnlyWhenGiven(t *testing.T) {
	assets := fstest.MapFS{
		"index.html":    {Data: []byte("<!doctype html><title>console</title>")},
		"js/app.js":     {Data: []byte("export {};")},
		"style.css":     {Data: []byte("body{}")},
		"../secret.txt": {Data: []byte("never")},
	}
	s := newTestServer(t, func(d *Deps) { d.Console = assets })
	for path, want := range map[string]string{"/": "text/html", "/console/js/app.js": "javascript", "/console/style.css": "text/css"} {
		resp, err := s.App().Test(httptest.NewRequest("GET", path, nil))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), want) || len(body) == 0 {
			t.Fatalf("GET %s: %d %q %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "connect-src 'self'") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
	}
	for _, path := range []string{"/console/nope.js", "/console/../secret.txt", "/console/%2e%2e/secret.txt", "/index.html"} {
		status, body, _ := do(t, s, httptest.NewRequest("GET", path, nil))
		if status != 404 || body["error"] == nil {
			t.Fatalf("GET %s: %d %v", path, status, body)
		}
	}

	off := newTestServer(t, nil)
	if status, body, _ := do(t, off, httptest.NewRequest("GET", "/", nil)); status != 404 || body["error"] == nil {
		t.Fatalf("GET / without a console: %d %v", status, body)
	}
}

// The embedded console has the channels page and links to it.
func TestConsoleHasTheChannelsPage(t *testing.T) {
	s := newTestServer(t, func(d *Deps) { d.Console = console.Assets() })
	for path, want := range map[string]string{
		"/":                        `href="#/channels"`,
		"/console/js/app.js":       `import * as channels from "./channels.js"`,
		"/console/js/channels.js":  `/qr.png`,
		"/console/js/taskpanel.js": `export function temporalBase`,
	} {
		resp, err := s.App().Test(httptest.NewRequest("GET", path, nil))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || !strings.Contains(string(body), want) {
			t.Fatalf("GET %s: %d, want %q in the file", path, resp.StatusCode, want)
		}
	}
}
