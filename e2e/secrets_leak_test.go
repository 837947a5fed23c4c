package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/enums/v1"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// Secrets planted in the configuration. The provider key has no
// credential shape (only the registry of configured values catches it); the
// header value and the channel secret are configured values too.
const (
	plantedProviderKey = "zq9PLANTED0provider0key"
	plantedHeaderValue = "zq9PLANTED0header0value"
	plantedChannelSec  = "zq9PLANTED0channel0secret"
	plantedSecretStore = "zq9PLANTED0store0value"
)

var plantedSecrets = []string{plantedProviderKey, plantedHeaderValue, plantedChannelSec, plantedSecretStore}

// echoProvider is an OpenAI-compatible provider that refuses every call with
// a 401 whose body repeats the request's credentials, as some providers do,
// plus whatever else it is told to quote.
func echoProvider(t *testing.T, alsoQuote ...string) string {
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(fakellm.Rule{Status: http.StatusUnauthorized, EchoAuth: true, Message: "also " + strings.Join(alsoQuote, " ")})
	return fake.OpenAIBaseURL()
}

// leaks names the planted secrets (and credential shapes) found in text.
func leaks(text []byte) []string {
	var found []string
	for _, s := range append(plantedSecrets, "sk-planted") {
		if bytes.Contains(text, []byte(s)) {
			found = append(found, s)
		}
	}
	return found
}

// TestProviderEchoedSecretsLeakNowhere: a provider whose error repeats our
// key (and other configured secrets) must not carry them to any API answer,
// run record, event, log line, stored file, Temporal history or hook.
func TestProviderEchoedSecretsLeakNowhere(t *testing.T) {
	t.Setenv("AGENTRY_TEST_LEAK_HOOK_SECRET", "zq9PLANTED0hook0secret")
	sink, err := gatewaytest.NewHookSink()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sink.Close)
	// The provider also quotes the other planted values and a
	// credential-shaped key nobody configured.
	provider := echoProvider(t, plantedHeaderValue, plantedChannelSec, plantedSecretStore, "sk-planted0unknown0key0123")
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"leaky.yaml": "id: leaky\nllm: {provider: echo, model: gpt-4o-mini}\nmax_turns: 2\n"},
		Config: fmt.Sprintf(`
llm:
  providers:
    echo: {type: openai, base_url: %q, api_key: %q, default_model: gpt-4o-mini, max_retries: 0}
runtime:
  ssrf: {enabled: true, allow_loopback: true}
  delivery: {initial_interval: 100ms, max_interval: 400ms, retry_for: 1m, attempt_timeout: 5s}
channels:
  webhook: {enabled: true, url: %q, secret: %q, headers: "X-Token: %s"}
hooks:
  - on: ["run.*"]
    url: %q
    secret_env: AGENTRY_TEST_LEAK_HOOK_SECRET
`, provider, plantedProviderKey, sink.URL, plantedChannelSec, plantedHeaderValue, sink.URL)})
	if r := g.Do("PUT", "/api/v1/secrets/planted", map[string]any{"value": plantedSecretStore}); r.Status >= 300 {
		t.Fatalf("set secret: %d %s", r.Status, r.Raw)
	}
	var surfaces []string
	check := func(where string, text []byte) {
		t.Helper()
		if l := leaks(text); len(l) > 0 {
			surfaces = append(surfaces, where)
			t.Errorf("%s leaks %v: %.400s", where, l, text)
		}
	}

	// The chat answer (502) and its stream's error frame.
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "leaky", "text": "hello"})
	if r.Status != http.StatusBadGateway {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	check("POST /chat", r.Raw)
	check("POST /chat/stream", g.Do("POST", "/api/v1/chat/stream", map[string]any{"agent_id": "leaky", "text": "hello"}).Raw)

	// A task run fails with the provider's error: run record, events, hook.
	id := wbCreateTask(t, g, map[string]any{"title": "leak", "agent_id": "leaky"})
	rr := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, rr, 202, "start run")
	run := wbWaitRun(t, g, id, wbID(t, rr), 60*time.Second, "failed", "finished")
	if run["status"] != "failed" || run["error"] == "" {
		t.Fatalf("run %v", run)
	}
	raw, _ := json.Marshal(run)
	check("run record", raw)
	check("GET runs", g.Do("GET", fmt.Sprintf("%s/tasks/%d/runs", wb, id), nil).Raw)
	waitUntil(t, 30*time.Second, "the run.failed hook", func() bool { return bytes.Contains(sink.All(), []byte("run.failed")) })
	check("hook bodies", sink.All())

	// A channel send whose receiver's answer is fine: the body carries
	// nothing secret either (the text quotes the provider key).
	d := g.Do("POST", "/api/v1/channels/webhook/send", map[string]any{"text": "the key is " + plantedProviderKey})
	if d.Status != http.StatusAccepted {
		t.Fatalf("send: %d %s", d.Status, d.Raw)
	}
	waitUntil(t, 30*time.Second, "the channel delivery", func() bool { return bytes.Contains(sink.All(), []byte("the key is")) })
	check("channel delivery body", sink.All())

	check("GET /logs", g.Do("GET", "/api/v1/logs?lines=1000", nil).Raw)
	check("GET /config", g.Do("GET", "/api/v1/config", nil).Raw)

	// Temporal history of the run.
	var hist bytes.Buffer
	it := g.Temporal.GetWorkflowHistory(context.Background(), fmt.Sprintf("task-%d", id), "", false, enums.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(ev)
		hist.Write(b)
	}
	if !bytes.Contains(hist.Bytes(), []byte("401")) {
		t.Fatalf("the history does not hold the provider's failure: %.600s", hist.String())
	}
	check("Temporal history", hist.Bytes())

	// Every file of the workspace (agentry.db and its WAL, logs).
	filepath.Walk(g.Workspace, func(path string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || strings.HasSuffix(path, ".yaml") || strings.Contains(path, "credentials") {
			return nil // config.yaml holds the configured values by design
		}
		b, _ := os.ReadFile(path)
		check("file "+strings.TrimPrefix(path, g.Workspace), b)
		return nil
	})
	if len(surfaces) > 0 {
		t.Logf("secrets found on %d surfaces: %v", len(surfaces), surfaces)
	}
}
