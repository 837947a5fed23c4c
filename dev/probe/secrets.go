package probe

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// planted are the secret values put everywhere the gateway knows a
// secret. None has a credential shape: only the gateway's registry of
// configured values can recognise them.
type planted struct {
	AdminKey, ViewerKey, JWTSecret    string
	ProviderKey, AnthropicKey         string
	ChannelSecret, ChannelHeader      string
	StoreValue, HookSecret, MCPHeader string
	// Unconfigured is credential-shaped and configured nowhere: a
	// provider quotes it, the scrubber's shapes must catch it.
	Unconfigured string
}

func plant(seed uint64) planted {
	v := func(name string) string { return fmt.Sprintf("zq9PROBE0%s0%08x", name, uint32(seed*2654435761)) }
	return planted{
		AdminKey: v("admin0key"), ViewerKey: v("viewer0key"), JWTSecret: v("jwt0secret"),
		ProviderKey: v("provider0key"), AnthropicKey: v("anthropic0key"),
		ChannelSecret: v("channel0secret"), ChannelHeader: v("channel0header"),
		StoreValue: v("store0value"), HookSecret: v("hook0secret"), MCPHeader: v("mcp0header"),
		Unconfigured: "sk-proj-" + v("unconfigured"),
	}
}

// named lists the values with their names.
func (p planted) named() map[string]string {
	return map[string]string{
		"admin key": p.AdminKey, "viewer key": p.ViewerKey, "jwt secret": p.JWTSecret,
		"provider key (env)": p.ProviderKey, "anthropic key": p.AnthropicKey,
		"channel secret": p.ChannelSecret, "channel header": p.ChannelHeader,
		"secrets store value": p.StoreValue, "hook secret": p.HookSecret, "mcp header": p.MCPHeader,
		"unconfigured credential": p.Unconfigured,
	}
}

// leakCue is the text that makes the fake provider answer 401 and echo the
// request's credentials (and quote the other planted values, as a provider
// quoting its input would).
const leakCue = "LEAKPROBE"

// replyCue makes it answer 200 with a reply that quotes every configured planted value
// (a model repeating what it was shown, issue 42): the reply reaches the
// caller, the session, the run log and the hooks unless it is scrubbed.
const replyCue = "REPLYPROBE"

func scriptLeak(fake *fakellm.Server, s planted) {
	fake.AddRules(fakellm.Rule{Contains: leakCue, Status: 401, EchoAuth: true,
		Message: fmt.Sprintf("Incorrect API key provided; also seen: %s %s %s %s %s %s %s", s.ChannelSecret, s.ChannelHeader,
			s.StoreValue, s.JWTSecret, s.ViewerKey, s.MCPHeader, s.Unconfigured)})
	// Every configured value; not the unconfigured credential-shaped one,
	// which a reply may legitimately contain (a code example's "sk-...":
	// docs/decisions.md, "Secrets in successful provider answers").
	var quoted strings.Builder
	for name, v := range s.named() {
		if v != s.Unconfigured {
			quoted.WriteString(" " + name + " " + v + ",")
		}
	}
	// Many small chunks, so a value straddles the stream's deltas.
	fake.AddRules(fakellm.Rule{Contains: replyCue, Reply: "Here is what I was given:" + quoted.String() + " done.", Chunks: 400})
}

// Secrets is the second part of the report.
type Secrets struct {
	Planted int `json:"planted"`
	// Triggered names the provider-echo failures caused (and their status).
	Triggered []string `json:"triggered"`
	// Found counts planted values (or their base64 forms) per surface:
	// must be 0 everywhere.
	Found map[string]int `json:"found"`
	Total int            `json:"total"`
	// Searched lists every surface with its size in bytes.
	Searched map[string]int `json:"searched_bytes"`
	Examples []string       `json:"examples,omitempty"`
}

// triggerLeaks makes the provider echo our credentials through chat, a
// streamed chat, a task run, a webhook (sync and async) and a delivery.
func triggerLeaks(c *client, s planted, sink *gatewaytest.HookSink, logf func(string, ...any)) []string {
	var out []string
	note := func(what string, a answer) { out = append(out, fmt.Sprintf("%s: %d", what, a.Status)) }
	note("PUT /secrets/probe-store", c.call("PUT", "/api/v1/secrets/probe-store", map[string]any{"value": s.StoreValue}))
	note("chat (openai format)", c.call("POST", "/api/v1/chat", map[string]any{"agent_id": "probe", "text": leakCue + " chat"}))
	note("chat (anthropic format)", c.call("POST", "/api/v1/chat", map[string]any{"agent_id": "claude", "text": leakCue + " chat"}))
	note("chat stream", c.call("POST", "/api/v1/chat/stream", map[string]any{"agent_id": "probe", "text": leakCue + " stream"}))
	note("webhook", c.call("POST", "/api/v1/webhooks/hook", map[string]any{"text": leakCue + " webhook"}))
	async := c.call("POST", "/api/v1/webhooks/hook?async=true", map[string]any{"text": leakCue + " async webhook"})
	note("async webhook", async)
	task := c.call("POST", "/api/v1/workboard/tasks", map[string]any{"title": leakCue + " task", "agent_id": "probe"})
	run := c.call("POST", "/api/v1/workboard/tasks/"+task.id("id")+"/run", nil)
	note("task run", run)
	// The same values in successful replies (200s).
	note("reply: chat", c.call("POST", "/api/v1/chat", map[string]any{"agent_id": "probe", "text": replyCue + " chat"}))
	note("reply: chat (anthropic format)", c.call("POST", "/api/v1/chat", map[string]any{"agent_id": "claude", "text": replyCue + " chat"}))
	note("reply: chat stream", c.call("POST", "/api/v1/chat/stream", map[string]any{"agent_id": "probe", "text": replyCue + " stream"}))
	note("reply: webhook", c.call("POST", "/api/v1/webhooks/hook", map[string]any{"text": replyCue + " webhook"}))
	replyTask := c.call("POST", "/api/v1/workboard/tasks", map[string]any{"title": replyCue + " task", "agent_id": "probe"})
	note("reply: task run", c.call("POST", "/api/v1/workboard/tasks/"+replyTask.id("id")+"/run", nil))
	note("channel send", c.call("POST", "/api/v1/channels/webhook/send", map[string]any{"text": "quoting " + s.ProviderKey + " and " + s.StoreValue}))
	// The run's failure reaches the hook receiver; wait for it and for the
	// async webhook's record.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && !bytes.Contains(sink.All(), []byte("run.failed")) {
		time.Sleep(200 * time.Millisecond)
	}
	if !bytes.Contains(sink.All(), []byte("run.failed")) {
		logf("warning: no run.failed hook arrived within 60 s")
	}
	r := c.call("GET", "/api/v1/workboard/tasks/"+task.id("id")+"/runs/"+run.id("id"), nil)
	out = append(out, fmt.Sprintf("task run record: %v", r.JSON["status"]))
	if id := async.id("run_id"); id != "" {
		for time.Now().Before(deadline) {
			r = c.call("GET", "/api/v1/webhooks/hook/runs/"+id, nil)
			if st, _ := r.JSON["status"].(string); st == "failed" || st == "succeeded" {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		out = append(out, fmt.Sprintf("async webhook record: %v", r.JSON["status"]))
	}
	// Read surfaces that show what happened (their answers are kept).
	for _, p := range []string{"/api/v1/workboard/tasks/" + task.id("id") + "/runs", "/api/v1/workboard/tasks/" + replyTask.id("id") + "/runs", "/api/v1/config", "/api/v1/channels/webhook",
		"/api/v1/channels", "/api/v1/deliveries", "/api/v1/secrets", "/api/v1/mcp/own", "/api/v1/costs/calls?limit=1000",
		"/api/v1/diagnostics", "/api/v1/logs/audit"} {
		c.call("GET", p, nil)
	}
	return out
}

// surfaces reads everything the gateway exposed or wrote: the answers
// kept, /events, /logs, the process output, and every file of the
// workspace except the configuration the operator wrote (config.yaml
// holds the configured values by design) and credentials/ (the key store).
func surfaces(c *client, g *gatewayProc, sink *gatewaytest.HookSink) map[string][]byte {
	out := map[string][]byte{
		"GET /events":             c.readStream("/api/v1/events?last_event_id=0", 3*time.Second),
		"GET /logs":               c.call("GET", "/api/v1/logs?lines=100000", nil).Raw,
		"hook and channel bodies": sink.All(),
		"process output":          []byte(g.output()),
	}
	out["HTTP answers"] = c.collected()
	filepath.Walk(g.ws, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(g.ws, path)
		if rel == "config.yaml" || strings.HasPrefix(rel, "credentials") || strings.HasPrefix(rel, "agents") {
			return nil
		}
		b, _ := os.ReadFile(path)
		out[surfaceOf(rel)] = append(out[surfaceOf(rel)], b...)
		return nil
	})
	return out
}

func surfaceOf(rel string) string {
	switch {
	case strings.HasPrefix(rel, filepath.Join("data", "temporal")):
		return "Temporal database"
	case strings.HasPrefix(rel, filepath.Join("data", "agentry.db")):
		return "agentry.db"
	case strings.HasPrefix(rel, "logs"):
		return "log files"
	}
	return "other workspace files"
}

// scan counts planted values (and their base64 forms) per surface.
func scan(s planted, surf map[string][]byte) *Secrets {
	rep := &Secrets{Found: map[string]int{}, Searched: map[string]int{}, Planted: len(s.named())}
	names := make([]string, 0, len(surf))
	for n := range surf {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, where := range names {
		text := surf[where]
		rep.Searched[where] = len(text)
		rep.Found[where] = 0
		for name, v := range s.named() {
			for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v))} {
				if n := bytes.Count(text, []byte(form)); n > 0 {
					rep.Found[where] += n
					rep.Total += n
					if len(rep.Examples) < 30 {
						i := bytes.Index(text, []byte(form))
						rep.Examples = append(rep.Examples, fmt.Sprintf("%s: %s x%d: …%q…", where, name, n, text[max(0, i-120):min(len(text), i+len(form)+40)]))
					}
				}
			}
		}
	}
	return rep
}
