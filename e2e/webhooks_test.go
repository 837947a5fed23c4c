package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ---------------------------------------------------------------------------
// A sigReceiver on loopback that checks signatures on its own (it does not use
// internal/delivery): HMAC-SHA256(secret, "<ts>.<raw body>"), lowercase hex,
// timestamp within 300 s. It counts every request and every accepted
// delivery id.

type sigReceiver struct {
	t      *testing.T
	secret string // "" expects unsigned requests
	addr   string

	mu        sync.Mutex
	srv       *http.Server
	hits      int
	failFirst int // answer 503 to the first failFirst requests
	attempts  map[string]int
	accepted  map[string]int
	bodies    []map[string]any
	headers   []http.Header
	bad       []string
	signedSet bool // requests carried signature headers
}

func newSigReceiver(t *testing.T, secret string) *sigReceiver {
	r := &sigReceiver{t: t, secret: secret, attempts: map[string]int{}, accepted: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.stop)
	return r
}

func (r *sigReceiver) URL() string { return "http://" + r.addr + "/hook" }

func (r *sigReceiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: r}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

// stop takes the sigReceiver down (connections are refused).
func (r *sigReceiver) stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// start brings it back on the same address.
func (r *sigReceiver) start() {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatalf("restart sigReceiver on %s: %v", r.addr, err)
	}
	r.serve(ln)
}

func (r *sigReceiver) verify(h http.Header, body []byte) error {
	sig, ts := h.Get("X-Agentry-Signature"), h.Get("X-Agentry-Timestamp")
	if r.secret == "" {
		if sig != "" || ts != "" {
			return errors.New("signed although no secret is set")
		}
		return nil
	}
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q", ts)
	}
	if d := time.Since(time.Unix(n, 0)); d > 300*time.Second || d < -300*time.Second {
		return fmt.Errorf("timestamp %d outside the window", n)
	}
	mac := hmac.New(sha256.New, []byte(r.secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(sig), []byte(want)) {
		return fmt.Errorf("signature %q does not match", sig)
	}
	return nil
}

func (r *sigReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	id := req.Header.Get("X-Agentry-Delivery")
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hits++
	r.attempts[id]++
	if r.hits <= r.failFirst {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if err := r.verify(req.Header, body); err != nil {
		r.bad = append(r.bad, err.Error())
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.accepted[id]++
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	r.bodies = append(r.bodies, m)
	r.headers = append(r.headers, req.Header.Clone())
	w.WriteHeader(http.StatusNoContent)
}

func (r *sigReceiver) snapshot() (hits int, accepted map[string]int, bodies []map[string]any, headers []http.Header, bad []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acc := map[string]int{}
	for k, v := range r.accepted {
		acc[k] = v
	}
	return r.hits, acc, append([]map[string]any(nil), r.bodies...), append([]http.Header(nil), r.headers...), append([]string(nil), r.bad...)
}

// waitUntil polls cond until it holds or the timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deliveryConfig is the gateway config of the delivery tests: loopback
// receivers allowed, short real backoff.
func deliveryConfig(url, secret, headers string) string {
	return fmt.Sprintf(`
runtime:
  ssrf: {enabled: true, allow_loopback: true}
  delivery: {initial_interval: 100ms, max_interval: 400ms, retry_for: 1m, attempt_timeout: 5s}
channels:
  webhook:
    enabled: true
    url: %q
    secret: %q
    headers: %q
`, url, secret, headers)
}

// ---------------------------------------------------------------------------
// Inbound webhooks

const webhookAgents = `
id: ops
trigger: webhook
webhook:
  text_path: $.alert.summary
  user_id_path: sender.login
  username_path: $.sender.name
  thread_id_path: alert.id
  include_raw: true
`

func webhookGateway(t *testing.T) *gatewaytest.Gateway {
	return gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"ops.yaml":     webhookAgents,
		"plain.yaml":   "id: plain\ntrigger: webhook\n",
		"indexed.yaml": "id: indexed\ntrigger: webhook\nwebhook: {text_path: 'events[1].text', thread_id_path: 'repo.full_name'}\n",
		"chat.yaml":    "id: chatonly\n",
		"cron.yaml":    "id: nightly\ntrigger: cron\nschedule: {cron: '0 3 * * *'}\n",
	}})
}

func TestWebhookInboundMapsAndReplies(t *testing.T) {
	g := webhookGateway(t)
	payload := `{"alert":{"id":"A-17","summary":"Disk 95% on db1"},"sender":{"login":"ana","name":"Ana B."},"extra":[1,2]}`
	r := g.Do("POST", "/api/v1/webhooks/ops", payload)
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	want := map[string]any{"reply": "echo: Disk 95% on db1", "session_id": "webhook-ops-A-17", "thread_id": "A-17", "user_id": "ana"}
	for k, v := range want {
		if r.JSON[k] != v {
			t.Errorf("%s = %v, want %v", k, r.JSON[k], v)
		}
	}
	// The same thread continues the session (history is sent).
	r2 := g.Do("POST", "/api/v1/webhooks/ops", `{"alert":{"id":"A-17","summary":"now 99%"},"sender":{"login":"ana"}}`)
	if r2.JSON["session_id"] != "webhook-ops-A-17" {
		t.Fatalf("second: %s", r2.Raw)
	}
	calls := g.Fake.Calls()
	if last := calls[len(calls)-1]; last.LastUserMessage != "now 99%" || last.MessageCount < 3 {
		t.Fatalf("second call: %+v (the thread's history should be sent)", last)
	}

	// include_raw: the compact payload is the run's metadata; ledger source is webhook.
	var run models.AgentRun
	if err := g.Store.DB.First(&run, "run_id = ?", r.JSON["run_id"]).Error; err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal([]byte(run.Metadata), &meta); err != nil {
		t.Fatalf("metadata %q: %v", run.Metadata, err)
	}
	if string(meta["raw"]) != payload || run.Source != "webhook" {
		t.Fatalf("metadata raw %s, source %s", meta["raw"], run.Source)
	}
	var ledger []models.LedgerEntry
	g.Store.DB.Where("run_id = ?", r.JSON["run_id"]).Find(&ledger)
	if len(ledger) == 0 || ledger[0].Source != "webhook" {
		t.Fatalf("ledger %+v", ledger)
	}

	// Fallbacks of an agent without a mapping, and no include_raw.
	for body, reply := range map[string]string{
		`{"text":"t1","message":"m"}`:                       "echo: t1",
		`{"message":"m1","body":"b"}`:                       "echo: m1",
		`{"body":"b1"}`:                                     "echo: b1",
		`{"content":"c1"}`:                                  "echo: c1",
		`{"issue":{"title":"Bug 1"},"alert":{"title":"x"}}`: "echo: Bug 1",
		`{"alert":{"title":"CPU high"}}`:                    "echo: CPU high",
		`{"text":{"rich":[1,2]}}`:                           `echo: {"rich":[1,2]}`,
		"{ \"z\": 1,\n \"a\": true }":                       `echo: {"z":1,"a":true}`,
	} {
		r := g.Do("POST", "/api/v1/webhooks/plain", body)
		if r.Status != 200 || r.JSON["reply"] != reply {
			t.Errorf("%s: %d %s, want %q", body, r.Status, r.Raw, reply)
		}
		if !strings.HasPrefix(fmt.Sprint(r.JSON["session_id"]), "webhook-plain-") || r.JSON["thread_id"] != "" || r.JSON["user_id"] != "webhook" {
			t.Errorf("%s: ids %s", body, r.Raw)
		}
		var run models.AgentRun
		g.Store.DB.First(&run, "run_id = ?", r.JSON["run_id"])
		if strings.Contains(run.Metadata, `"raw"`) {
			t.Errorf("raw attached without include_raw: %s", run.Metadata)
		}
	}

	// Bracket indexes; a thread id with unsafe characters.
	r = g.Do("POST", "/api/v1/webhooks/indexed", `{"events":[{"text":"a"},{"text":"second"}],"repo":{"full_name":"acme/api"}}`)
	sid := fmt.Sprint(r.JSON["session_id"])
	if r.JSON["reply"] != "echo: second" || r.JSON["thread_id"] != "acme/api" || !strings.HasPrefix(sid, "webhook-indexed-acme_api-") {
		t.Fatalf("indexed: %s", r.Raw)
	}
}

func TestWebhookRefusals(t *testing.T) {
	g := webhookGateway(t)
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/api/v1/webhooks/ops", "not json", 400},
		{"/api/v1/webhooks/ops", "", 400},
		{"/api/v1/webhooks/ops", `{"a":`, 400},
		{"/api/v1/webhooks/chatonly", `{"text":"hi"}`, 404},
		{"/api/v1/webhooks/nightly", `{"text":"hi"}`, 404},
		{"/api/v1/webhooks/ghost", `{"text":"hi"}`, 404},
	} {
		r := g.Do("POST", c.path, c.body)
		if r.Status != c.status || r.JSON["error"] == nil {
			t.Errorf("%s %q: %d %s, want %d", c.path, c.body, r.Status, r.Raw, c.status)
		}
	}
	if r := g.DoAs("", "POST", "/api/v1/webhooks/plain", `{"text":"hi"}`); r.Status != 401 {
		t.Errorf("no credentials: %d", r.Status)
	}
	if n := g.Fake.CallCount(); n != 0 {
		t.Errorf("refused requests reached the provider %d times", n)
	}
}

func postWithKey(t *testing.T, g *gatewaytest.Gateway, agent, key, body string) (int, map[string]any, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.URL()+"/api/v1/webhooks/"+agent, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m, resp.Header
}

func TestWebhookIdempotencyKey(t *testing.T) {
	g := webhookGateway(t)
	status, first, _ := postWithKey(t, g, "plain", "evt-1", `{"text":"once"}`)
	if status != 200 {
		t.Fatalf("%d %v", status, first)
	}
	calls := g.Fake.CallCount()
	status, again, h := postWithKey(t, g, "plain", "evt-1", `{"text":"once"}`)
	if status != 200 || h.Get("Idempotent-Replayed") != "true" || again["reply"] != first["reply"] || again["run_id"] != first["run_id"] {
		t.Fatalf("repeat: %d %v %v", status, again, h)
	}
	if g.Fake.CallCount() != calls {
		t.Fatal("the repeat ran the agent again")
	}
	// Same key, other body: refused.
	if status, m, _ := postWithKey(t, g, "plain", "evt-1", `{"text":"other"}`); status != 409 {
		t.Fatalf("reused key: %d %v", status, m)
	}
	// Concurrent repeats: exactly one run; the others are told at once to
	// come back (409 with Retry-After, not a wait), and then get its reply.
	g.Fake.Script(fakeSlow("slow one", 2*time.Second))
	before := g.Fake.CallCount()
	firstDone := make(chan map[string]any, 1)
	go func() {
		_, m, _ := postWithKey(t, g, "plain", "evt-2", `{"text":"slow one"}`)
		firstDone <- m
	}()
	waitUntil(t, 10*time.Second, "the first request's claim", func() bool {
		var n int64
		g.Store.DB.Model(&models.WebhookIdempotency{}).Where("status = ?", models.IdempotencyRunning).Count(&n)
		return n == 1
	})
	for range 3 {
		status, m, h := postWithKey(t, g, "plain", "evt-2", `{"text":"slow one"}`)
		if status != 409 || m["code"] != "idempotency_key_in_progress" || h.Get("Retry-After") == "" {
			t.Fatalf("a repeat meeting a live claim: %d %v %v", status, m, h)
		}
		select {
		case <-firstDone:
			t.Fatal("the repeat waited for the first request instead of answering at once")
		default:
		}
	}
	first2 := <-firstDone
	status, again2, h2 := postWithKey(t, g, "plain", "evt-2", `{"text":"slow one"}`)
	if status != 200 || h2.Get("Idempotent-Replayed") != "true" || again2["run_id"] != first2["run_id"] {
		t.Fatalf("repeat after the first finished: %d %v %v", status, again2, h2)
	}
	if n := g.Fake.CallCount() - before; n != 1 {
		t.Fatalf("%d runs for one key", n)
	}
	// The key is durable: stored in the database, not in memory.
	var n int64
	g.Store.DB.Model(&models.WebhookIdempotency{}).Where("status = ?", models.IdempotencyDone).Count(&n)
	if n != 2 {
		t.Fatalf("%d stored keys", n)
	}
}

func fakeSlow(contains string, d time.Duration) fakellm.Rule {
	return fakellm.Rule{Contains: contains, Delay: fakellm.Duration(d)}
}

// A request in flight when its gateway died leaves its claim behind (issue
// 18 item 3): a retry is told at once when to come back, and once the dead
// owner's short lease has run out (seconds, not the 15 minutes of before)
// the retry runs the agent.
func TestWebhookIdempotencyClaimOfADeadProcess(t *testing.T) {
	g := webhookGateway(t)
	if status, m, _ := postWithKey(t, g, "plain", "evt-dead", `{"text":"crash me"}`); status != 200 {
		t.Fatalf("%d %v", status, m)
	}
	// Turn the stored record into the claim a process killed mid-run leaves:
	// running, owned by that process, its lease renewed one last time.
	res := g.Store.DB.Model(&models.WebhookIdempotency{}).Where("status = ?", models.IdempotencyDone).
		Updates(map[string]any{"status": models.IdempotencyRunning, "owner": "4242-deadbeef", "response": "",
			"lease_until": time.Now().UTC().Add(3 * time.Second)})
	if res.Error != nil || res.RowsAffected != 1 {
		t.Fatalf("plant the claim: %v (%d rows)", res.Error, res.RowsAffected)
	}
	calls := g.Fake.CallCount()
	began := time.Now()
	status, m, h := postWithKey(t, g, "plain", "evt-dead", `{"text":"crash me"}`)
	if status != 409 || m["code"] != "idempotency_key_in_progress" {
		t.Fatalf("retry before the lease ran out: %d %v", status, m)
	}
	retry, err := strconv.Atoi(h.Get("Retry-After"))
	if err != nil || retry < 1 || retry > 10 {
		t.Fatalf("Retry-After %q", h.Get("Retry-After"))
	}
	if waited := time.Since(began); waited > 2*time.Second {
		t.Fatalf("the retry hung %s instead of answering at once", waited)
	}
	var reply map[string]any
	waitUntil(t, 30*time.Second, "the retry to take the claim over", func() bool {
		status, reply, _ = postWithKey(t, g, "plain", "evt-dead", `{"text":"crash me"}`)
		return status == 200
	})
	if g.Fake.CallCount() != calls+1 || reply["reply"] == nil {
		t.Fatalf("the retry after takeover: %d calls, %v", g.Fake.CallCount()-calls, reply)
	}
	rec := models.WebhookIdempotency{}
	g.Store.DB.First(&rec)
	if rec.Status != models.IdempotencyDone || rec.Owner == "4242-deadbeef" {
		t.Fatalf("record after takeover: %+v", rec)
	}
}

// ---------------------------------------------------------------------------
// Outbound: the webhook channel through the Delivery workflow (real
// Temporal, real HTTP, short real backoff).

func TestChannelDeliveryRetriesSignsAndCountsOnce(t *testing.T) {
	rcv := newSigReceiver(t, "s3cret")
	rcv.failFirst = 3
	g := gatewaytest.Start(t, gatewaytest.Options{Config: deliveryConfig(rcv.URL(), "s3cret", "X-Team: ops\nAuthorization: Bearer rcv-token")})

	r := g.Do("POST", "/api/v1/channels/webhook/send", map[string]any{"text": "hello out there"})
	if r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	id := r.JSON["delivery_id"].(string)
	waitUntil(t, 30*time.Second, "the delivery", func() bool { _, acc, _, _, _ := rcv.snapshot(); return acc[id] == 1 })
	waitUntil(t, 10*time.Second, "the final record", func() bool {
		return g.Do("GET", "/api/v1/deliveries/"+id, nil).JSON["status"] == "delivered"
	})
	hits, acc, bodies, headers, bad := rcv.snapshot()
	if hits != 4 || len(acc) != 1 || acc[id] != 1 || len(bad) != 0 {
		t.Fatalf("hits %d, accepted %v, bad %v", hits, acc, bad)
	}
	if rcv.attempts[id] != 4 {
		t.Fatalf("the delivery id changed between attempts: %v", rcv.attempts)
	}
	b, h := bodies[0], headers[0]
	if b["text"] != "hello out there" || b["channel"] != "webhook" || b["delivery_id"] != id || b["source"] != "api" {
		t.Fatalf("body %v", b)
	}
	if h.Get("X-Team") != "ops" || h.Get("Authorization") != "Bearer rcv-token" || h.Get("Content-Type") != "application/json" {
		t.Fatalf("configured headers missing: %v", h)
	}
	d := g.Do("GET", "/api/v1/deliveries/"+id, nil)
	if d.JSON["attempts"] != float64(4) || d.JSON["last_status_code"] != float64(204) || len(d.JSON["attempt_list"].([]any)) != 4 {
		t.Fatalf("record %s", d.Raw)
	}
	ch := g.Do("GET", "/api/v1/channels/webhook", nil)
	st := ch.JSON["status"].(map[string]any)
	if st["deliveries"] != float64(1) || st["failures"] != float64(0) || st["last_status"] != "delivered" || st["last_delivery_at"] == nil {
		t.Fatalf("status %s", ch.Raw)
	}
}

func TestChannelToOverrideRefusalsAndSettings(t *testing.T) {
	main, other := newSigReceiver(t, "s3cret"), newSigReceiver(t, "s3cret")
	g := gatewaytest.Start(t, gatewaytest.Options{Config: deliveryConfig(main.URL(), "s3cret", "X-Team: ops\nAuthorization: Bearer rcv-token")})
	send := func(body map[string]any) gatewaytest.Response {
		return g.Do("POST", "/api/v1/channels/webhook/send", body)
	}

	// `to` is used for that message only.
	r := send(map[string]any{"text": "to the other one", "to": other.URL()})
	if r.Status != 202 {
		t.Fatalf("%d %s", r.Status, r.Raw)
	}
	waitUntil(t, 20*time.Second, "the override delivery", func() bool { _, acc, _, _, _ := other.snapshot(); return len(acc) == 1 })
	r = send(map[string]any{"text": "to the configured one"})
	waitUntil(t, 20*time.Second, "the normal delivery", func() bool { _, acc, _, _, _ := main.snapshot(); return len(acc) == 1 })
	if hits, _, _, _, _ := other.snapshot(); hits != 1 {
		t.Fatalf("the override stuck: other receiver hit %d times", hits)
	}
	if u := g.Do("GET", "/api/v1/channels/webhook", nil).JSON["settings"].(map[string]any)["url"]; u != main.URL() {
		t.Fatalf("saved url changed to %v", u)
	}

	// Refused destinations: 400, nothing queued, nothing sent.
	before := countDeliveries(t, g)
	for _, to := range []string{"file:///etc/passwd", "http://10.0.0.1/hook", "http://169.254.169.254/latest/meta-data", "http://192.168.1.10/",
		"gopher://127.0.0.1/", "not a url", "/relative"} {
		r := send(map[string]any{"text": "x", "to": to})
		if r.Status != 400 || r.JSON["code"] != "destination_refused" {
			t.Errorf("to=%s: %d %s", to, r.Status, r.Raw)
		}
	}
	if r := send(map[string]any{"text": ""}); r.Status != 400 {
		t.Errorf("empty text: %d", r.Status)
	}
	if r := g.Do("POST", "/api/v1/channels/sms/send", map[string]any{"text": "x"}); r.Status != 404 {
		t.Errorf("unknown channel: %d", r.Status)
	}
	if after := countDeliveries(t, g); after != before {
		t.Fatalf("refused sends were queued: %d -> %d", before, after)
	}

	// Settings: redacted on read, secrets write-only, unknown keys named.
	ch := g.Do("GET", "/api/v1/channels", nil)
	list := ch.JSON["channels"].([]any)
	set := list[0].(map[string]any)["settings"].(map[string]any)
	if set["secret"] != "********" || strings.Contains(fmt.Sprint(set["headers"]), "rcv-token") || strings.Contains(string(ch.Raw), "X-Team: ops") || !strings.Contains(string(ch.Raw), "X-Team: ********") {
		t.Fatalf("list %s", ch.Raw)
	}
	if strings.Contains(string(ch.Raw), "s3cret") {
		t.Fatal("secret in the response")
	}
	if r := g.Do("PATCH", "/api/v1/channels/webhook", map[string]any{"settings": map[string]any{"colour": "red"}}); r.Status != 400 ||
		!strings.Contains(fmt.Sprint(r.JSON["error"]), "colour") {
		t.Fatalf("unknown key: %d %s", r.Status, r.Raw)
	}

	// Unsigned when there is no secret.
	unsigned := newSigReceiver(t, "")
	r = g.Do("PATCH", "/api/v1/channels/webhook", map[string]any{"settings": map[string]any{"secret": "", "url": unsigned.URL()}})
	if r.Status != 200 || r.JSON["settings"].(map[string]any)["secret"] != "" {
		t.Fatalf("patch: %d %s", r.Status, r.Raw)
	}
	send(map[string]any{"text": "plain"})
	waitUntil(t, 20*time.Second, "the unsigned delivery", func() bool { _, acc, _, _, _ := unsigned.snapshot(); return len(acc) == 1 })
	if _, _, _, h, bad := unsigned.snapshot(); len(bad) != 0 || h[0].Get("X-Agentry-Delivery") == "" {
		t.Fatalf("unsigned: bad %v headers %v", bad, h)
	}

	// Disabled: 409, nothing queued.
	if r := g.Do("POST", "/api/v1/channels/webhook/disable", nil); r.Status != 200 || r.JSON["enabled"] != false {
		t.Fatalf("disable: %d %s", r.Status, r.Raw)
	}
	if r := send(map[string]any{"text": "x"}); r.Status != 409 {
		t.Fatalf("send while disabled: %d", r.Status)
	}
}

func countDeliveries(t *testing.T, g *gatewaytest.Gateway) int64 {
	var n int64
	if err := g.Store.DB.Model(&models.Delivery{}).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestChannelReceiverDownGetsEverythingWhenBack(t *testing.T) {
	rcv := newSigReceiver(t, "s3cret")
	g := gatewaytest.Start(t, gatewaytest.Options{Config: deliveryConfig(rcv.URL(), "s3cret", "")})
	rcv.stop()
	var ids []string
	for i := range 5 {
		r := g.Do("POST", "/api/v1/channels/webhook/send", map[string]any{"text": fmt.Sprintf("message %d", i)})
		if r.Status != 202 {
			t.Fatalf("%d %s", r.Status, r.Raw)
		}
		ids = append(ids, r.JSON["delivery_id"].(string))
	}
	// Down for a while: the attempts fail and back off.
	waitUntil(t, 20*time.Second, "failed attempts", func() bool {
		var n int64
		g.Store.DB.Model(&models.DeliveryAttempt{}).Where("status_code = 0").Count(&n)
		return n >= 10
	})
	rcv.start()
	waitUntil(t, 30*time.Second, "every message", func() bool { _, acc, _, _, _ := rcv.snapshot(); return len(acc) == 5 })
	time.Sleep(500 * time.Millisecond) // nothing more should arrive
	_, acc, _, _, bad := rcv.snapshot()
	for _, id := range ids {
		if acc[id] != 1 {
			t.Errorf("%s accepted %d times", id, acc[id])
		}
	}
	if len(bad) != 0 {
		t.Fatalf("bad signatures: %v", bad)
	}
}

func TestChannelNonRetryableAnswerFailsOnce(t *testing.T) {
	gone := http.NewServeMux()
	var hits int
	var mu sync.Mutex
	gone.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.WriteHeader(http.StatusGone)
	})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	srv := &http.Server{Handler: gone}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	g := gatewaytest.Start(t, gatewaytest.Options{Config: deliveryConfig("http://"+ln.Addr().String()+"/", "", "")})
	id := g.Do("POST", "/api/v1/channels/webhook/send", map[string]any{"text": "x"}).JSON["delivery_id"].(string)
	waitUntil(t, 20*time.Second, "the failure", func() bool {
		return g.Do("GET", "/api/v1/deliveries/"+id, nil).JSON["status"] == "failed"
	})
	time.Sleep(time.Second)
	mu.Lock()
	defer mu.Unlock()
	if hits != 1 {
		t.Fatalf("a 410 was retried: %d hits", hits)
	}
	st := g.Do("GET", "/api/v1/channels/webhook", nil).JSON["status"].(map[string]any)
	if st["failures"] != float64(1) || !strings.Contains(fmt.Sprint(st["last_error"]), "410") {
		t.Fatalf("status %v", st)
	}
}

// ---------------------------------------------------------------------------
// Event hooks: events matching `on` (and `agents`) go out signed, with the
// secret read from the named environment variable.

func TestEventHooksDeliverMatchingEvents(t *testing.T) {
	t.Setenv("AGENTRY_TEST_HOOK_SECRET", "hook-secret-1")
	rcv := newSigReceiver(t, "hook-secret-1")
	g := gatewaytest.Start(t, gatewaytest.Options{Config: deliveryConfig(rcv.URL(), "", "") + fmt.Sprintf(`
hooks:
  - on: ["test.*"]
    agents: [writer]
    url: %q
    secret_env: AGENTRY_TEST_HOOK_SECRET
`, rcv.URL())})
	bus := g.Services().Events
	ctx := t.Context()
	// A hook that never ran starts at the end of the stream: wait until it
	// has taken its place.
	waitUntil(t, 10*time.Second, "the hook's cursor", func() bool {
		var n int64
		g.Store.DB.Model(&models.HookCursor{}).Count(&n)
		return n == 1
	})
	for _, ev := range []models.Event{
		{Type: "test.ping", AgentID: "writer", Payload: `{"n":1}`},
		{Type: "test.ping", AgentID: "reader", Payload: `{"n":2}`},   // other agent
		{Type: "other.thing", AgentID: "writer", Payload: `{"n":3}`}, // other type
		{Type: "test.pong", AgentID: "writer", Payload: `{"n":4}`},
	} {
		ev.DedupeKey = ""
		if _, err := bus.Publish(ctx, &ev); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "two hook deliveries", func() bool { _, acc, _, _, _ := rcv.snapshot(); return len(acc) == 2 })
	time.Sleep(time.Second)
	hits, acc, bodies, _, bad := rcv.snapshot()
	if hits != 2 || len(acc) != 2 || len(bad) != 0 {
		t.Fatalf("hits %d accepted %v bad %v", hits, acc, bad)
	}
	types := map[string]bool{}
	for _, b := range bodies {
		types[fmt.Sprint(b["type"])] = true
		ev := b["event"].(map[string]any)
		if ev["agent_id"] != "writer" || b["delivery_id"] == "" {
			t.Fatalf("body %v", b)
		}
	}
	if !types["test.ping"] || !types["test.pong"] {
		t.Fatalf("types %v", types)
	}
}

// BenchmarkChannelDelivery measures the outbound path end to end: POST
// /channels/webhook/send -> Delivery workflow -> signed POST to a loopback
// receiver. Senders run closed-loop: each sends a message and waits for its
// receipt before sending the next, so the figures are a sustained rate with
// the latency at that rate (not a queue draining). It reports deliveries
// per second, the latency from the send request to the receipt (p50, p95)
// and how long the 202 took (the message recorded and its workflow
// started).
//
//	go test -run '^$' -bench ChannelDelivery -benchtime 1000x e2e/main_test.go e2e/webhooks_test.go
//
// AGENTRY_BENCH_SENDERS sets how many senders run at once (default 16; 1
// measures the latency of an otherwise idle gateway).
func BenchmarkChannelDelivery(b *testing.B) {
	var mu sync.Mutex
	received := map[string]chan time.Time{}
	waiter := func(id string) chan time.Time {
		mu.Lock()
		defer mu.Unlock()
		ch, ok := received[id]
		if !ok {
			ch = make(chan time.Time, 1)
			received[id] = ch
		}
		return ch
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		select {
		case waiter(r.Header.Get("X-Agentry-Delivery")) <- time.Now():
		default: // a repeat
		}
		w.WriteHeader(http.StatusNoContent)
	})}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	g := gatewaytest.Start(b, gatewaytest.Options{Config: deliveryConfig("http://"+ln.Addr().String()+"/", "bench-secret", "X-Bench: 1")})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	senders := 16
	if v, err := strconv.Atoi(os.Getenv("AGENTRY_BENCH_SENDERS")); err == nil && v > 0 {
		senders = v
	}
	lat, accept := make([]time.Duration, b.N), make([]time.Duration, b.N)
	next := make(chan int)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("POST", g.URL()+"/api/v1/channels/webhook/send", strings.NewReader(fmt.Sprintf(`{"text":"load %d"}`, i)))
				req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
				req.Header.Set("Content-Type", "application/json")
				sent := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					b.Error(err)
					continue
				}
				var m map[string]any
				json.NewDecoder(resp.Body).Decode(&m)
				resp.Body.Close()
				accept[i] = time.Since(sent)
				id, _ := m["delivery_id"].(string)
				select {
				case at := <-waiter(id):
					lat[i] = at.Sub(sent)
				case <-time.After(time.Minute):
					b.Errorf("message %d (%s) not received within a minute", i, id)
				}
			}
		}()
	}
	for i := 0; i < b.N; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(accept)
	b.ReportMetric(float64(accept[len(accept)/2].Microseconds())/1000, "send-202-p50-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*95/100].Microseconds())/1000, "p95-ms")
}

// A kill between recording a delivery and starting its workflow left the
// delivery pending for ever (issue 18 item 5). The record carries the
// workflow's input (its outbox entry) until the workflow has started; the
// next start sweeps such records and starts their workflows, idempotently:
// a delivery whose workflow did start is not sent twice.
func TestDeliveryRecordedBeforeACrashIsSentAfterRestart(t *testing.T) {
	rcv := newSigReceiver(t, "s3cret")
	ws := t.TempDir()
	opts := gatewaytest.Options{Workspace: ws, Config: deliveryConfig(rcv.URL(), "s3cret", "")}
	g := gatewaytest.Start(t, opts)

	// One sent normally, then made to look unstarted again (as if the
	// process died after starting its workflow but before noting it).
	r := g.Do("POST", "/api/v1/channels/webhook/send", map[string]any{"text": "sent before the crash"})
	if r.Status != 202 {
		t.Fatalf("send: %d %s", r.Status, r.Raw)
	}
	sent := r.JSON["delivery_id"].(string)
	waitUntil(t, 30*time.Second, "the first delivery", func() bool { _, acc, _, _, _ := rcv.snapshot(); return acc[sent] == 1 })
	var rec models.Delivery
	if err := g.Store.DB.First(&rec, "id = ?", sent).Error; err != nil || rec.StartInput != "" {
		t.Fatalf("a started delivery keeps its outbox entry: %v %q", err, rec.StartInput)
	}

	// The orphan: recorded as Enqueue records it, its workflow never started.
	orphan := delivery.NewID()
	body, _ := json.Marshal(delivery.ChannelMessage{DeliveryID: orphan, Channel: "webhook", Text: "recorded before the crash", Source: delivery.SourceAPI, CreatedAt: time.Now().UTC()})
	retry := workflows.DeliveryRetry{InitialInterval: 100 * time.Millisecond, MaxInterval: 400 * time.Millisecond, RetryFor: time.Minute, AttemptTimeout: 5 * time.Second}
	for _, m := range []workflows.DeliveryInput{
		{Version: workflows.DeliveryInputVersion, DeliveryID: orphan, Channel: "webhook", Body: string(body), Source: delivery.SourceAPI, Retry: retry},
	} {
		input, _ := json.Marshal(m)
		if err := g.Store.CreateDelivery(t.Context(), &models.Delivery{ID: m.DeliveryID, Channel: "webhook", Source: delivery.SourceAPI,
			Target: rcv.URL(), WorkflowID: workflows.DeliveryWorkflowID(m.DeliveryID), StartInput: string(input)}); err != nil {
			t.Fatal(err)
		}
	}
	again, _ := json.Marshal(workflows.DeliveryInput{Version: workflows.DeliveryInputVersion, DeliveryID: sent, Channel: "webhook", Body: `{"text":"must not be sent twice"}`, Source: delivery.SourceAPI, Retry: retry})
	if err := g.Store.DB.Model(&models.Delivery{}).Where("id = ?", sent).Updates(map[string]any{"status": models.DeliveryPending, "start_input": string(again)}).Error; err != nil {
		t.Fatal(err)
	}
	if err := g.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	g2 := gatewaytest.Start(t, opts)
	waitUntil(t, 30*time.Second, "the orphan's delivery after the restart", func() bool {
		return g2.Do("GET", "/api/v1/deliveries/"+orphan, nil).JSON["status"] == "delivered"
	})
	_, acc, _, _, _ := rcv.snapshot()
	if acc[orphan] != 1 || acc[sent] != 1 {
		t.Fatalf("accepted: %v", acc)
	}
	var left int64
	g2.Store.DB.Model(&models.Delivery{}).Where("start_input <> ''").Count(&left)
	if left != 0 {
		t.Fatalf("%d outbox entries left after the sweep", left)
	}
}
