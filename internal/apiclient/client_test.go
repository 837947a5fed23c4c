package apiclient

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadEvents(t *testing.T) {
	stream := "data: Hel\n\ndata: lo\ndata:  world\n\n: ping\n\nevent: error\ndata: {\"error\":\"boom\"}\n\ndata: [DONE]\n\n"
	var got []Event
	if err := ReadEvents(strings.NewReader(stream), func(e Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []Event{{Data: "Hel"}, {Data: "lo\n world"}, {Name: "error", Data: `{"error":"boom"}`}, {Data: "[DONE]"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events = %q\nwant %q", got, want)
	}
}

func TestErrorsAndUnixSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "gw.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("unix sockets unavailable: %v", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v1/agents/missing", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer k" {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(404)
		fmt.Fprint(w, `{"error":"agent \"missing\" not found","code":"not_found"}`)
	})
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(503)
		fmt.Fprint(w, `{"status":"degraded","version":"t","checks":{"temporal":{"status":"error","error":"down"}}}`)
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	c, err := New("unix://"+sock, "k", Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Agent(context.Background(), "missing")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 404 || ae.Code != "not_found" || !strings.Contains(err.Error(), `agent "missing" not found`) {
		t.Fatalf("err = %v", err)
	}
	h, err := c.Health(context.Background())
	if err != nil || h.Status != "degraded" || h.Checks["temporal"].Error != "down" || len(h.RawJSON()) == 0 {
		t.Fatalf("health = %+v, %v", h, err)
	}
	dead, _ := New("http://127.0.0.1:1", "", Options{})
	_, err = dead.Agents(context.Background())
	var ce *ConnectionError
	if !errors.As(err, &ce) {
		t.Fatalf("dead gateway = %T %v", err, err)
	}
	if _, err := New("ftp://x", "", Options{}); err == nil {
		t.Fatal("ftp accepted")
	}
}

// A newer gateway sends fields and enum values this client was not
// generated with: the fields it knows still decode, the body --json prints
// is the gateway's own, and nothing fails.
func TestAnswerWithUnknownFields(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api/v1/agents/a":
			fmt.Fprint(w, `{"id":"a","llm":{"provider":"p","model":"m","max_tokens":5,"reasoning":"high"},`+
				`"enabled":true,"trigger":"telepathy","teams":["x"],"memory":{"kind":"vector"},"channels":["webhook"]}`)
		case "/api/v1/approvals":
			fmt.Fprint(w, `{"approvals":[{"id":3,"status":"escalated","tool":"t","arguments":{"b":1,"a":2},`+
				`"firing":null,"sandbox":{"image":"x"}}],"next_cursor":"","total":1}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	c, err := New(srv.URL, "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := c.Agent(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if ag.ID != "a" || ag.LLM.Provider != "p" || ag.LLM.MaxTokens != 5 || ag.Enabled == nil || !*ag.Enabled ||
		ag.Trigger != "telepathy" || len(ag.Channels) != 1 {
		t.Fatalf("agent = %+v", ag.Agent)
	}
	if !strings.Contains(string(ag.RawJSON()), `"teams":["x"]`) {
		t.Fatalf("raw body lost the unknown field: %s", ag.RawJSON())
	}
	l, err := c.Approvals(context.Background(), ApprovalFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Approvals) != 1 || l.Approvals[0].ID != 3 || l.Approvals[0].Status != "escalated" ||
		l.Approvals[0].Firing != nil || string(l.Approvals[0].Arguments) != `{"b":1,"a":2}` {
		t.Fatalf("approvals = %+v", l.Approvals)
	}
}

// Optional query parameters left at their zero value are not sent (the
// gateway answers 400 to limit=0), and the bearer key and user agent are.
func TestRequestShape(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization")+" "+r.Header.Get("User-Agent"))
		fmt.Fprint(w, `{}`)
	}))
	defer srv.Close()
	c, err := New(srv.URL+"/", "k", Options{UserAgent: "agentry/test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = c.Memory(ctx, "", 0)
	_, _ = c.Memory(ctx, "a b", 5)
	_, _ = c.Approvals(ctx, ApprovalFilter{Status: "pending", TaskID: 2})
	_, _ = c.ImportAgentPackage(ctx, []byte(`{}`), true, false)
	_, _ = c.Secrets(ctx)
	_, _ = c.Agent(ctx, "x/y")
	want := []string{
		"GET /api/v1/memory Bearer k agentry/test",
		"GET /api/v1/memory?agent_id=a+b&limit=5 Bearer k agentry/test",
		"GET /api/v1/approvals?status=pending&task_id=2 Bearer k agentry/test",
		"POST /api/v1/agent-packages/import?enable=true&overwrite=false Bearer k agentry/test",
		"GET /api/v1/secrets Bearer k agentry/test",
		"GET /api/v1/agents/x%2Fy Bearer k agentry/test",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
