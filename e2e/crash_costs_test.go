package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// Nothing unpriced after a crash: the concurrency proof's load (300
// concurrent chats, a $1.00 hard budget) with a SIGKILL in its middle, restart it, wait past the reservation TTL.
// Every call the provider received is priced (the unsettled ones at their
// reserved worst case), none at $0, and recorded spend never exceeds the
// budget; attribution and status say what happened.
func TestCostsCrashLeavesNoCallUnpriced(t *testing.T) {
	// Its own gateway process and Temporal server, mostly waiting: runs
	// beside the other crash tests (see crashParallel).
	crashParallel(t)
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	crashCostsProof(t, "")
}

// The same on PostgreSQL with two gateways sharing the database, the load
// split between them: one is killed and restarted while the other goes on.
func TestCostsCrashLeavesNoCallUnpricedPostgresTwoGateways(t *testing.T) {
	// Not beside the other crash tests: its two gateways and the server
	// load the machine enough to slow theirs past their timings.
	if testing.Short() {
		t.Skip("builds and runs agentryd")
	}
	crashCostsProof(t, testenv.Postgres(t))
}

// crashCostsProof runs the proof on SQLite (dsn empty: one gateway) or on
// the PostgreSQL database dsn (two gateways; the one holding the most
// calls at its provider is killed).
func crashCostsProof(t *testing.T, dsn string) {
	bin := gatewaytest.Binary(t, "agentryd")

	storage := ""
	if dsn != "" {
		storage = fmt.Sprintf("storage: {backend: postgres, dsn: %q}\n", dsn)
	}
	const key = "crash-costs-key-0123456789"
	// gateway returns the environment and base URL of a new gateway, with its
	// own workspace (and embedded Temporal).
	gateway := func(fake *fakellm.Server) (map[string]string, string) {
		ws := t.TempDir()
		os.MkdirAll(filepath.Join(ws, "agents"), 0o755)
		os.WriteFile(filepath.Join(ws, "agents", "exact.yaml"), []byte(exactAgent), 0o644)
		cfgPath := filepath.Join(ws, "config.yaml")
		// $1.00 fits 100 calls of $0.01: of 300 concurrent chats, 100 are admitted.
		os.WriteFile(cfgPath, []byte(fmt.Sprintf(`%s
llm:
  default_provider: openai
  providers:
    openai: {type: openai, base_url: %q, default_model: exact}
costs:
  enforcement_mode: hard
  daily_budget_usd: 1.00
  reservation_ttl: 4s
  pricing:
    openai/exact: {input_per_mtok: 0, output_per_mtok: 100, source: test, version: t1, effective_date: "2024-01-01"}
`, storage, fake.OpenAIBaseURL())), 0o644)
		ports := gatewaytest.FreePorts(t, 2)
		return map[string]string{
			"AGENTRY_CONFIG_PATH":                     cfgPath,
			"AGENTRY_WORKSPACE":                       ws,
			"AGENTRY_SERVER_PORT":                     strconv.Itoa(ports[0]),
			"AGENTRY_SERVER_API_KEY":                  key,
			"AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT": strconv.Itoa(ports[1]),
			"AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED":    "false",
		}, fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	}
	gateways := 1
	if dsn != "" {
		gateways = 2
	}
	var (
		fakes []*fakellm.Server
		envs  []map[string]string
		bases []string
		procs []*gatewaytest.Process
	)
	for range gateways {
		// One provider per gateway, so the test knows which gateway holds
		// the calls in flight: the one killed must hold some, or the crash
		// proves nothing (with two gateways, the other one may have
		// admitted the whole budget first on a loaded machine).
		fake := fakellm.New()
		if err := fake.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fake.Close)
		// Every answer takes 3 s and costs exactly its $0.01 worst case.
		fake.Script(fakellm.Rule{Model: "exact", Delay: fakellm.Duration(3 * time.Second), Usage: &fakellm.Usage{InputTokens: 10, OutputTokens: 100}})
		env, base := gateway(fake)
		proc := gatewaytest.StartProcess(t, bin, env)
		gatewaytest.WaitHTTP(t, base+"/health", 90*time.Second, proc)
		fakes, envs, bases, procs = append(fakes, fake), append(envs, env), append(bases, base), append(procs, proc)
	}
	callCount := func() (total, most, busiest int) {
		for i, f := range fakes {
			n := f.CallCount()
			total += n
			if n > most {
				most, busiest = n, i
			}
		}
		return total, most, busiest
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 384}, Timeout: 30 * time.Second}
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One user each: chats of one user share a session and run
			// one after another (the session lock).
			req, _ := http.NewRequest("POST", bases[i%len(bases)]+"/api/v1/chat", strings.NewReader(fmt.Sprintf(`{"agent_id":"exact","user_id":"u%d","text":"crash %d"}`, i, i)))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	// Kill while the admitted calls wait for their answers: the gateway
	// with the most calls at its provider.
	deadline := time.Now().Add(60 * time.Second)
	for {
		total, _, _ := callCount()
		if total >= 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d provider calls\n%s", total, procs[0].Output)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, inFlight, victim := callCount()
	procs[victim].Kill(t)
	wg.Wait()
	received, _, _ := callCount()
	t.Logf("killed gateway %d of %d with %d calls at its provider; %d calls at the providers in all", victim+1, gateways, inFlight, received)

	base := bases[victim]
	second := gatewaytest.StartProcess(t, bin, envs[victim])
	// The console's page, not /health: on PostgreSQL the other gateway may
	// have priced the unsettled calls already, and /health then fails its
	// costs check (as asserted below).
	gatewaytest.WaitHTTP(t, base+"/", 90*time.Second, second)
	get := func(path string, out any) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	var st struct {
		Status   string   `json:"status"`
		Problems []string `json:"problems"`
		Periods  struct {
			Day struct {
				SpendMicros    int64 `json:"spend_micros"`
				ReservedMicros int64 `json:"reserved_micros"`
			} `json:"day"`
		} `json:"periods"`
		InFlight struct {
			Reservations int64 `json:"reservations"`
		} `json:"in_flight"`
		Attribution struct {
			Percent   float64 `json:"percent"`
			Unsettled int64   `json:"unsettled_calls"`
		} `json:"attribution"`
	}
	// The reservations lapse after 4 s; the reaper passes every 5 s. It
	// also marks expired the rows a killed process left pending without a
	// reservation (see below), so wait for those too: the reservations can
	// be gone a pass before them.
	var calls struct {
		Calls []ledgerRow `json:"calls"`
	}
	waitFor := time.Now().Add(60 * time.Second)
	for {
		get("/api/v1/costs/status", &st)
		get("/api/v1/costs/calls?limit=1000", &calls)
		pending := 0
		for _, r := range calls.Calls {
			if r.Outcome == "pending" {
				pending++
			}
		}
		if st.InFlight.Reservations == 0 && pending == 0 {
			break
		}
		if time.Now().After(waitFor) {
			t.Fatalf("reservations still held or calls still pending (%d): %+v\n%s", pending, st, second.Output)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var priced, total int64
	unsettled := 0
	for _, r := range calls.Calls {
		if r.Outcome == "rejected" || (r.Outcome == "expired" && r.CostMicros == 0) {
			// Never admitted: on PostgreSQL the row is written before the
			// budget check, and a process killed between a check that did
			// not fit and the rejection leaves it pending without a
			// reservation, later marked expired. It reached no provider.
			continue
		}
		priced++
		total += r.CostMicros
		if r.CostMicros == 0 {
			t.Errorf("call %s (%s) recorded at $0", r.CallID, r.Outcome)
		}
		if r.Outcome == "unsettled" {
			unsettled++
			if r.PricingStatus != "estimated" {
				t.Errorf("unsettled call %s has pricing_status %s", r.CallID, r.PricingStatus)
			}
		}
	}
	t.Logf("ledger: %d calls priced, $%.6f, %d unsettled; provider received %d; day spend $%.6f reserved $%.6f; attribution %.2f%%",
		priced, float64(total)/1e6, unsettled, received, float64(st.Periods.Day.SpendMicros)/1e6, float64(st.Periods.Day.ReservedMicros)/1e6, st.Attribution.Percent)
	if total < int64(received)*10_000 {
		t.Fatalf("ledger cost %d micros < %d calls received x $0.01", total, received)
	}
	if int64(len(calls.Calls)) >= 1000 {
		t.Fatalf("more ledger rows than one page: the checks below would miss some")
	}
	if priced < int64(received) {
		t.Fatalf("the provider received %d calls, the ledger holds %d: a call without a row", received, priced)
	}
	if st.Periods.Day.SpendMicros+st.Periods.Day.ReservedMicros > 1_000_000 {
		t.Fatalf("spend %d + reserved %d exceeds the $1.00 budget", st.Periods.Day.SpendMicros, st.Periods.Day.ReservedMicros)
	}
	if unsettled == 0 || st.Attribution.Unsettled != int64(unsettled) || st.Attribution.Percent >= 100 || st.Status != "degraded" {
		t.Fatalf("status does not say what happened: %+v (unsettled rows %d)", st, unsettled)
	}
	// /health fails its costs check (attribution below 100%).
	var health struct {
		Status string `json:"status"`
		Checks map[string]struct {
			Status string `json:"status"`
			Error  string `json:"error"`
		} `json:"checks"`
	}
	get("/health", &health)
	if health.Checks["costs"].Status != "error" {
		t.Fatalf("health: %+v", health)
	}
}
