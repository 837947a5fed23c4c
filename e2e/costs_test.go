package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// Cost governance end to end: the real chat API, the fake provider, SQLite
// or PostgreSQL (two gateways sharing one database are two gateways of
// one test process with the same DSN, each with its own controller,
// connection pool, limiter and breakers), Redis for the shared rate limit.

// exactAgent's worst case is exactly $0.01: 100 output tokens at $100 per
// million, free input. The fake reports exactly 100 output tokens, so every
// served call costs exactly its reservation.
const exactAgent = "id: exact\nllm: {provider: openai, model: exact, max_tokens: 100}\n"

const exactBudget = `
costs:
  enforcement_mode: hard
  daily_budget_usd: 1.00
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`

func startFake(t *testing.T) *fakellm.Server {
	t.Helper()
	f := fakellm.New()
	if err := f.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// providersYAML declares the three fake providers (replacing the harness'
// ones, so per-provider policy keys can be set) with extra YAML per id.
func providersYAML(f *fakellm.Server, extra map[string]string) string {
	var b strings.Builder
	b.WriteString("llm:\n  default_provider: ollama\n  providers:\n")
	fmt.Fprintf(&b, "    ollama: {type: ollama, base_url: %q, default_model: llama3.2%s}\n", f.URL(), extra["ollama"])
	fmt.Fprintf(&b, "    openai: {type: openai, base_url: %q, default_model: gpt-4o-mini%s}\n", f.OpenAIBaseURL(), extra["openai"])
	fmt.Fprintf(&b, "    anthropic: {type: anthropic, base_url: %q, default_model: claude-3-5-haiku%s}\n", f.URL(), extra["anthropic"])
	return b.String()
}

type ledgerRow struct {
	CallID         string  `json:"call_id"`
	RunID          string  `json:"run_id"`
	Subject        string  `json:"subject"`
	Source         string  `json:"source"`
	Trigger        string  `json:"trigger"`
	Outcome        string  `json:"outcome"`
	RejectionCode  string  `json:"rejection_code"`
	Attempts       int     `json:"attempts"`
	InputTokens    int64   `json:"input_tokens"`
	OutputTokens   int64   `json:"output_tokens"`
	UsageEstimated bool    `json:"usage_estimated"`
	CostMicros     int64   `json:"cost_micros"`
	CostUSD        float64 `json:"cost_usd"`
	MaxOutput      int64   `json:"max_output_tokens"`
	Clamped        bool    `json:"clamped"`
	PricingStatus  string  `json:"pricing_status"`
}

func ledger(t *testing.T, g *gatewaytest.Gateway, query string) []ledgerRow {
	t.Helper()
	r := g.Do("GET", "/api/v1/costs/calls?limit=1000&"+query, nil)
	if r.Status != 200 {
		t.Fatalf("GET /costs/calls: %d %s", r.Status, r.Raw)
	}
	var out struct{ Calls []ledgerRow }
	if err := json.Unmarshal(r.Raw, &out); err != nil {
		t.Fatal(err)
	}
	return out.Calls
}

type costStatus struct {
	Status   string   `json:"status"`
	Problems []string `json:"problems"`
	Periods  struct {
		Day struct {
			SpendMicros    int64 `json:"spend_micros"`
			ReservedMicros int64 `json:"reserved_micros"`
		} `json:"day"`
	} `json:"periods"`
	InFlight struct {
		Reservations   int64 `json:"reservations"`
		ReservedMicros int64 `json:"reserved_micros"`
	} `json:"in_flight"`
	Attribution struct {
		Percent float64 `json:"percent"`
	} `json:"attribution"`
	Rejections struct {
		ByReason map[string]int64 `json:"by_reason"`
	} `json:"rejections"`
	Retries struct {
		RetryAttempts int64 `json:"retry_attempts"`
	} `json:"retries"`
	Breakers []struct {
		Provider    string `json:"provider"`
		State       string `json:"state"`
		TimesOpened int    `json:"times_opened"`
	} `json:"breakers"`
}

func status(t *testing.T, g *gatewaytest.Gateway) costStatus {
	t.Helper()
	r := g.Do("GET", "/api/v1/costs/status", nil)
	if r.Status != 200 {
		t.Fatalf("GET /costs/status: %d %s", r.Status, r.Raw)
	}
	var st costStatus
	if err := json.Unmarshal(r.Raw, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// proveBudgetOverHTTP sends n concurrent chat requests spread over the
// gateways and checks the concurrency proof's claims.
func proveBudgetOverHTTP(t *testing.T, gws []*gatewaytest.Gateway, n int) {
	var served, rejected atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			g := gws[i%len(gws)]
			body := fmt.Sprintf(`{"agent_id":"exact","text":"request %d","user_id":"u%d"}`, i, i)
			status, raw := postJSON(t, client, g.URL()+"/api/v1/chat", body)
			switch {
			case status == 200:
				served.Add(1)
			case status == 402 && strings.Contains(raw, `"code":"budget_exceeded"`):
				rejected.Add(1)
			default:
				t.Errorf("request %d: %d %s", i, status, raw)
			}
		}()
	}
	close(start)
	wg.Wait()
	g := gws[0]
	// On PostgreSQL settled reservations reach the day's counter in the
	// applier's next batch (internal/costs/applier.go), a moment after the
	// answers: wait for it, then check.
	st := status(t, g)
	for deadline := time.Now().Add(10 * time.Second); st.Periods.Day.ReservedMicros != 0 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		st = status(t, g)
	}
	rows := ledger(t, g, "agent_id=exact")
	t.Logf("%d gateway(s): served %d, 402 %d, recorded $%.6f, ledger rows %d, provider calls %d",
		len(gws), served.Load(), rejected.Load(), float64(st.Periods.Day.SpendMicros)/1e6, len(rows), g.Fake.CallCount())
	if served.Load()+rejected.Load() != int64(n) {
		t.Fatalf("every request must be served or rejected with 402")
	}
	if st.Periods.Day.SpendMicros > 1_000_000 || st.Periods.Day.SpendMicros != served.Load()*10_000 {
		t.Fatalf("recorded spend %d micros for %d served requests of $0.01 (budget $1.00)", st.Periods.Day.SpendMicros, served.Load())
	}
	if served.Load() != 100 {
		t.Fatalf("served %d; exactly 100 requests of exactly $0.01 fit in $1.00", served.Load())
	}
	if st.InFlight.Reservations != 0 || st.InFlight.ReservedMicros != 0 || st.Periods.Day.ReservedMicros != 0 {
		t.Fatalf("reservations left after settle: %+v", st.InFlight)
	}
	if len(rows) != n {
		t.Fatalf("the ledger has %d rows for %d requests", len(rows), n)
	}
	runs := map[string]bool{}
	for _, r := range rows {
		if runs[r.RunID] {
			t.Fatalf("two ledger rows for run %s", r.RunID)
		}
		runs[r.RunID] = true
	}
	if got := int64(g.Fake.CallCount()); got != served.Load() {
		t.Fatalf("the provider saw %d calls for %d served requests", got, served.Load())
	}
}

func postJSON(t testing.TB, c *http.Client, url, body string) (int, string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return 0, ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func TestCostsConcurrencyProofSQLite(t *testing.T) {
	fake := startFake(t)
	fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 100}})
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: exactBudget, Agents: map[string]string{"exact.yaml": exactAgent}})
	proveBudgetOverHTTP(t, []*gatewaytest.Gateway{g}, 300)
}

func TestCostsConcurrencyProofPostgresTwoGateways(t *testing.T) {
	dsn := testenv.Postgres(t)
	if dsn == "" {
		t.Skip("PostgreSQL not available")
	}
	fake := startFake(t)
	fake.Script(fakellm.Rule{Model: "exact", Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 100}})
	cfg := exactBudget + fmt.Sprintf("storage: {backend: postgres, dsn: %q}\n", dsn)
	agents := map[string]string{"exact.yaml": exactAgent}
	g1 := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: cfg, Agents: agents})
	g2 := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: cfg, Agents: agents})
	proveBudgetOverHTTP(t, []*gatewaytest.Gateway{g1, g2}, 300)
}

func TestCostsRetryIsOneLedgerRow(t *testing.T) {
	g := startChatGateway(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "retry-me", Times: 1, Status: 429, RetryAfter: "1", Message: "rate limited"})
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "retry-me please"})
	if r.Status != 200 {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	rows := ledger(t, g, "run_id="+r.JSON["run_id"].(string))
	if len(rows) != 1 || rows[0].Attempts != 2 || rows[0].Outcome != "succeeded" || g.Fake.CallCount() != 2 {
		t.Fatalf("rows = %+v (provider calls %d)", rows, g.Fake.CallCount())
	}
	if st := status(t, g); st.Retries.RetryAttempts != 1 {
		t.Fatalf("status retry attempts = %d", st.Retries.RetryAttempts)
	}
}

func TestCostsCutStreamAndClientDisconnectAreEstimated(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: map[string]string{
		"cutter.yaml":   "id: cutter\nllm: {provider: openai, model: gpt-4o-mini}\n",
		"slowpoke.yaml": "id: slowpoke\nllm: {provider: openai, model: gpt-4o-mini}\n",
	}, Config: `
costs:
  pricing:
    openai/gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6, source: test, version: t1}
`})
	g.Fake.Script(
		fakellm.Rule{Contains: "cut", Reply: "one two three four five six seven eight", Chunks: 8, CutAfterChunks: 2},
		fakellm.Rule{Contains: "slow", Reply: strings.Repeat("word ", 40), Chunks: 40, ChunkDelay: fakellm.Duration(100 * time.Millisecond)},
	)
	// A stream the provider cuts mid-way.
	resp := postStream(t, g, map[string]any{"agent_id": "cutter", "text": "cut it"})
	_, named, _ := readSSE(t, resp.Body)
	resp.Body.Close()
	if len(named["error"]) == 0 {
		t.Fatalf("a cut stream must end with an error event: %v", named)
	}
	rows := ledger(t, g, "agent_id=cutter")
	if len(rows) != 1 || rows[0].Outcome != "incomplete" || !rows[0].UsageEstimated || rows[0].OutputTokens <= 0 || rows[0].CostMicros <= 0 {
		t.Fatalf("cut stream rows = %+v", rows)
	}

	// A client that goes away after the first chunk.
	ctx, cancel := context.WithCancel(context.Background())
	data, _ := json.Marshal(map[string]any{"agent_id": "slowpoke", "text": "slow please"})
	req, _ := http.NewRequestWithContext(ctx, "POST", g.URL()+"/api/v1/chat/stream", bytes.NewReader(data))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q, %v", line, err)
	}
	cancel()
	resp.Body.Close()
	var row ledgerRow
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if rows := ledger(t, g, "agent_id=slowpoke"); len(rows) == 1 && rows[0].Outcome != "pending" {
			row = rows[0]
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if row.Outcome != "cancelled" || !row.UsageEstimated || row.InputTokens <= 0 || row.OutputTokens <= 0 || row.CostMicros <= 0 {
		t.Fatalf("disconnected stream row = %+v", row)
	}
	if st := status(t, g); st.InFlight.Reservations != 0 {
		t.Fatalf("reservations left: %+v", st.InFlight)
	}
}

func TestCostsPerUserRPMSharedOverRedis(t *testing.T) {
	url := testenv.Redis(t)
	if url == "" {
		t.Skip("Redis not available")
	}
	fake := startFake(t)
	cfg := fmt.Sprintf("rate_limit: {enabled: true, backend: redis, redis_url: %q, per_user_rpm: 3}\n", url)
	agents := map[string]string{"gpt.yaml": "id: gpt\nllm: {provider: openai, model: gpt-4o-mini}\n"}
	g1 := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: cfg, Agents: agents})
	g2 := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: cfg, Agents: agents})
	for i, g := range []*gatewaytest.Gateway{g1, g2, g1} {
		if r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": fmt.Sprint("hi ", i)}); r.Status != 200 {
			t.Fatalf("request %d: %d %s", i, r.Status, r.Raw)
		}
	}
	for _, g := range []*gatewaytest.Gateway{g2, g1} {
		r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "one too many"})
		if r.Status != 429 || r.JSON["code"] != "rate_limited" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("4th request: %d %s (Retry-After %q)", r.Status, r.Raw, r.Header.Get("Retry-After"))
		}
	}
	if fake.CallCount() != 3 {
		t.Fatalf("the provider saw %d calls", fake.CallCount())
	}
	// Each gateway here has its own SQLite ledger: each recorded its refusal.
	for _, g := range []*gatewaytest.Gateway{g1, g2} {
		rows := ledger(t, g, "outcome=rejected")
		if len(rows) != 1 || rows[0].RejectionCode != "rate_limited" || rows[0].Subject == "" {
			t.Fatalf("rejected rows = %+v", rows)
		}
	}
}

func TestCostsProviderTPMClamping(t *testing.T) {
	fake := startFake(t)
	fake.Script(fakellm.Rule{Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 800}})
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: providersYAML(fake, map[string]string{"openai": ", max_tokens_per_minute: 1000"}),
		Agents: map[string]string{"tpm.yaml": "id: tpm\nllm: {provider: openai, model: gpt-4o-mini, max_tokens: 800}\n"}})
	chat := func(text string) gatewaytest.Response {
		return g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "tpm", "text": text, "user_id": text})
	}
	if r := chat("first"); r.Status != 200 {
		t.Fatalf("first: %d %s", r.Status, r.Raw)
	}
	r := chat("second")
	if r.Status != 200 {
		t.Fatalf("second: %d %s", r.Status, r.Raw)
	}
	calls := fake.Calls()
	if got := calls[len(calls)-1].MaxTokens; got <= 0 || got >= 190 {
		t.Fatalf("second call's max_tokens = %d, want it clamped to what is left of the minute (< 190)", got)
	}
	rows := ledger(t, g, "run_id="+r.JSON["run_id"].(string))
	if len(rows) != 1 || !rows[0].Clamped {
		t.Fatalf("rows = %+v", rows)
	}
	r = chat("third")
	if r.Status != 429 || r.JSON["code"] != "provider_tpm" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("third: %d %s", r.Status, r.Raw)
	}
	if fake.CallCount() != 2 {
		t.Fatalf("the provider saw %d calls", fake.CallCount())
	}
}

func TestCostsBreakerOpensHalfOpensAndCloses(t *testing.T) {
	fake := startFake(t)
	fake.Script(fakellm.Rule{Contains: "boom", Status: 503, Message: "overloaded"})
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake,
		Config: providersYAML(fake, map[string]string{"openai": ", max_retries: -1"}) + "costs: {circuit_failure_threshold: 2, circuit_cooldown: 1s}\n",
		Agents: map[string]string{"gpt.yaml": "id: gpt\nllm: {provider: openai, model: gpt-4o-mini}\n"}})
	chat := func(text string) gatewaytest.Response {
		return g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": text, "user_id": text})
	}
	for i := range 2 {
		if r := chat(fmt.Sprint("boom ", i)); r.Status != 502 {
			t.Fatalf("boom %d: %d %s", i, r.Status, r.Raw)
		}
	}
	seen := fake.CallCount()
	r := chat("hello")
	if r.Status != 503 || r.JSON["code"] != "circuit_open" || r.Header.Get("Retry-After") == "" {
		t.Fatalf("open circuit: %d %s", r.Status, r.Raw)
	}
	if fake.CallCount() != seen {
		t.Fatal("an open circuit let a call through")
	}
	time.Sleep(1100 * time.Millisecond)
	for _, text := range []string{"probe", "closed again"} { // half-open: one probe, then closed
		if r := chat(text); r.Status != 200 {
			t.Fatalf("%s: %d %s", text, r.Status, r.Raw)
		}
	}
	st := status(t, g)
	if len(st.Breakers) == 0 || st.Breakers[0].State != "closed" || st.Breakers[0].TimesOpened != 1 {
		t.Fatalf("breakers = %+v", st.Breakers)
	}
}

func TestCostsConfirmationFlow(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Options{Config: `
costs:
  confirmation_threshold_usd: 0.001
  pricing:
    openai/gpt-4o-mini: {input_per_mtok: 1, output_per_mtok: 10, source: test, version: t1}
`, Agents: map[string]string{"pricey.yaml": "id: pricey\nllm: {provider: openai, model: gpt-4o-mini, max_tokens: 1000}\n"}})
	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "pricey", "text": "write a lot"})
	if r.Status != 409 || r.JSON["code"] != "confirmation_required" {
		t.Fatalf("unconfirmed: %d %s", r.Status, r.Raw)
	}
	est, _ := r.JSON["estimate"].(map[string]any)
	if est == nil || est["cost_usd"].(float64) < 0.01 || est["output_tokens"].(float64) != 1000 || est["confirmation_threshold_usd"].(float64) != 0.001 {
		t.Fatalf("estimate = %v", r.JSON["estimate"])
	}
	if g.Fake.CallCount() != 0 {
		t.Fatal("the provider was called before confirmation")
	}
	r = g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "pricey", "text": "write a lot", "confirm_cost": true})
	if r.Status != 200 || g.Fake.CallCount() != 1 {
		t.Fatalf("confirmed: %d %s", r.Status, r.Raw)
	}
}

func TestCostsPolicyRejectionsBeforeProviderAccess(t *testing.T) {
	fake := startFake(t)
	cfg := providersYAML(fake, map[string]string{
		"openai": ", region: eu",
		"ollama": ", local: true, allowed_data_classes: [public, unclassified]",
	}) + `  allowed_regions: [eu]
  allowed_models: [gpt-4o-mini, gpt-4o, llama3.2, claude-3-5-haiku]
costs:
  unknown_pricing: block
  pricing:
    openai/gpt-4o-mini: {input_per_mtok: 1, output_per_mtok: 1, version: t1}
    ollama/llama3.2: {input_per_mtok: 0, output_per_mtok: 0, version: local}
    anthropic/claude-3-5-haiku: {input_per_mtok: 1, output_per_mtok: 1, version: t1}
`
	g := gatewaytest.Start(t, gatewaytest.Options{Fake: fake, Config: cfg, Agents: map[string]string{
		"ok.yaml":       "id: ok\nllm: {provider: openai, model: gpt-4o-mini}\n",
		"local.yaml":    "id: local\nllm: {provider: ollama, model: llama3.2}\n",
		"us.yaml":       "id: us\nllm: {provider: anthropic, model: claude-3-5-haiku}\n",
		"secret.yaml":   "id: secret\nllm: {provider: ollama, model: llama3.2, data_classification: restricted}\n",
		"unpriced.yaml": "id: unpriced\nllm: {provider: openai, model: gpt-4o}\n",
		"listed.yaml":   "id: listed\nllm: {provider: openai, model: o1}\n",
	}})
	for _, tc := range []struct{ agent, code string }{
		{"us", "region"}, {"secret", "data_class"}, {"unpriced", "unknown_pricing"}, {"listed", "not_allowed"},
	} {
		r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": tc.agent, "text": "hello"})
		if r.Status != 403 || r.JSON["code"] != tc.code {
			t.Fatalf("%s: %d %s", tc.agent, r.Status, r.Raw)
		}
	}
	if fake.CallCount() != 0 {
		t.Fatalf("the provider saw %d calls", fake.CallCount())
	}
	codes := map[string]bool{}
	for _, row := range ledger(t, g, "outcome=rejected") {
		codes[row.RejectionCode] = true
	}
	// The allowlist is also checked by chat before the run starts (no call,
	// no row); the other three are the controller's and leave a row each.
	for _, c := range []string{"region", "data_class", "unknown_pricing"} {
		if !codes[c] {
			t.Errorf("no rejected ledger row with code %s: %v", c, codes)
		}
	}
	for _, agent := range []string{"ok", "local"} {
		if r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": agent, "text": "hello"}); r.Status != 200 {
			t.Fatalf("%s: %d %s", agent, r.Status, r.Raw)
		}
	}
}

func TestCostsEndpoints(t *testing.T) {
	g := startChatGateway(t, `
costs:
  enforcement_mode: hard
  daily_budget_usd: 5
  confirmation_threshold_usd: 0.1
  pricing:
    openai/gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6, cached_input_per_mtok: 0.075, source: "https://openai.com/pricing", effective_date: "2024-07-18", version: "2024-07"}
`)
	for _, body := range []string{
		`{"provider":"openai","model":"gpt-4o-mini","input_tokens":-1}`,
		`{"provider":"openai","model":"gpt-4o-mini","input_tokens":"many"}`,
		`{"provider":"openai","model":"gpt-4o-mini","input_tokens":1.5}`,
		`{"provider":"openai","model":"gpt-4o-mini","output_tokens":-3}`,
		`{"provider":"nope"}`,
		`not json`,
	} {
		if r := g.Do("POST", "/api/v1/costs/estimate", body); r.Status != 400 {
			t.Errorf("estimate %s: %d %s", body, r.Status, r.Raw)
		}
	}
	r := g.Do("POST", "/api/v1/costs/estimate", `{"provider":"openai","model":"gpt-4o-mini","input_tokens":1000000,"cached_input_tokens":500000,"output_tokens":1000000}`)
	if r.Status != 200 {
		t.Fatalf("estimate: %d %s", r.Status, r.Raw)
	}
	// The output allowance is capped at the ceiling (32768 by default):
	// 500k x $0.15/M + 500k x $0.075/M + 32768 x $0.6/M = $0.1321608 -> 132161 micros.
	if r.JSON["cost_micros"].(float64) != 132_161 || r.JSON["output_tokens"].(float64) != 32768 || r.JSON["pricing_status"] != "priced" || r.JSON["would_admit"] != false ||
		r.JSON["confirmation_required"] != true {
		t.Fatalf("estimate = %s", r.Raw)
	}
	if rej := r.JSON["rejection"].(map[string]any); rej["code"] != "confirmation_required" || rej["status"].(float64) != 409 {
		t.Fatalf("rejection = %v", rej)
	}
	r = g.Do("POST", "/api/v1/costs/estimate", `{"agent_id":"gpt","input_tokens":100,"confirm_cost":true}`)
	if r.Status != 200 || r.JSON["would_admit"] != true || r.JSON["model"] != "gpt-4o-mini" {
		t.Fatalf("estimate for an agent: %d %s", r.Status, r.Raw)
	}

	for i := range 3 {
		if r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": fmt.Sprint("hello ", i)}); r.Status != 200 {
			t.Fatalf("chat: %d %s", r.Status, r.Raw)
		}
	}
	r = g.Do("GET", "/api/v1/costs/chargeback?group_by=user,feature,provider,model", nil)
	if r.Status != 200 {
		t.Fatalf("chargeback: %d %s", r.Status, r.Raw)
	}
	groups := r.JSON["groups"].([]any)
	first := groups[0].(map[string]any)
	if len(groups) != 1 || first["feature"] != "chat" || first["provider"] != "openai" || first["model"] != "gpt-4o-mini" ||
		first["calls"].(float64) != 3 || first["cost_micros"].(float64) <= 0 || first["user"] == "" {
		t.Fatalf("chargeback = %s", r.Raw)
	}
	r = g.Do("GET", "/api/v1/costs/chargeback?group_by=user,colour", nil)
	if r.Status != 400 || !strings.Contains(r.JSON["error"].(string), `"colour"`) {
		t.Fatalf("unknown dimension: %d %s", r.Status, r.Raw)
	}
	tomorrow := time.Now().UTC().AddDate(0, 0, 1).Format(time.DateOnly)
	r = g.Do("GET", "/api/v1/costs/chargeback?group_by=model&from="+tomorrow, nil)
	if r.Status != 200 || len(r.JSON["groups"].([]any)) != 0 {
		t.Fatalf("empty range: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("GET", "/api/v1/costs/chargeback?from=yesterday", nil); r.Status != 400 {
		t.Fatalf("bad from: %d %s", r.Status, r.Raw)
	}

	r = g.Do("GET", "/api/v1/costs/status", nil)
	if r.Status != 200 {
		t.Fatalf("status: %d %s", r.Status, r.Raw)
	}
	for _, field := range []string{"status", "enforcement_mode", "periods", "in_flight", "unknown_priced_calls", "attribution",
		"rejections", "retries", "pricing_coverage", "forecast", "reconciliation", "breakers", "rate_limit"} {
		if _, ok := r.JSON[field]; !ok {
			t.Errorf("status has no %s", field)
		}
	}
	if r.JSON["status"] != "ready" || r.JSON["enforcement_mode"] != "hard" {
		t.Fatalf("status = %s", r.Raw)
	}
	// Spend and the ledger are for the admin and operator roles.
	for _, path := range []string{"/api/v1/costs/status", "/api/v1/costs/chargeback", "/api/v1/costs/calls"} {
		if r := g.DoAs(viewerKey, "GET", path, nil); r.Status != 403 {
			t.Errorf("viewer %s: %d", path, r.Status)
		}
	}
	if r := g.DoAs(viewerKey, "POST", "/api/v1/costs/estimate", `{"input_tokens":10}`); r.Status != 200 {
		t.Errorf("viewer estimate: %d %s", r.Status, r.Raw)
	}
}

// BenchmarkChatGovernance measures what cost governance adds to the chat
// path: the same POST /api/v1/chat against a gateway in hard mode (budget,
// pricing, ledger, reservation) and one whose router has no gate, requests
// alternating between the two. Reported: p50 of each and the added p50.
// SQLite by default; BENCH_POSTGRES=1 stores both on PostgreSQL.
//
//	go test -run '^$' -bench ChatGovernance -benchtime 2000x ./e2e/
func BenchmarkChatGovernance(b *testing.B) {
	agents := map[string]string{"gpt.yaml": "id: gpt\nllm: {provider: openai, model: gpt-4o-mini}\n"}
	cfg := `
costs:
  enforcement_mode: hard
  daily_budget_usd: 1000000
  pricing:
    openai/gpt-4o-mini: {input_per_mtok: 0.15, output_per_mtok: 0.6, version: t1}
`
	if testing.Short() {
		b.Skip("benchmark")
	}
	pg := os.Getenv("BENCH_POSTGRES") != "" // each gateway on its own PostgreSQL database
	on := gatewaytest.Start(b, gatewaytest.Options{Config: cfg, Agents: agents, Postgres: pg})
	off := gatewaytest.Start(b, gatewaytest.Options{Config: cfg, Agents: agents, Postgres: pg})
	off.Services().Router.SetGate(nil)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	send := func(g *gatewaytest.Gateway, i int) time.Duration {
		body := fmt.Sprintf(`{"agent_id":"gpt","text":"hello %d","user_id":"bench-%d"}`, i, i%256)
		start := time.Now()
		if status, raw := postJSON(b, client, g.URL()+"/api/v1/chat", body); status != 200 {
			b.Fatalf("status %d %s", status, raw)
		}
		return time.Since(start)
	}
	n := max(b.N, 200)
	for i := range 50 { // warm up both
		send(on, i)
		send(off, i)
	}
	var lon, loff []time.Duration
	b.ResetTimer()
	for i := range n {
		lon = append(lon, send(on, i))
		loff = append(loff, send(off, i))
	}
	b.StopTimer()
	p50 := func(l []time.Duration) time.Duration {
		sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
		return l[len(l)/2]
	}
	pOn, pOff := p50(lon), p50(loff)
	b.ReportMetric(float64(pOn.Microseconds()), "governed-p50-µs")
	b.ReportMetric(float64(pOff.Microseconds()), "ungoverned-p50-µs")
	b.ReportMetric(float64((pOn - pOff).Microseconds()), "added-p50-µs")
}
