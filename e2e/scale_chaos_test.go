package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// EnvChaosFull runs TestScaleChaos in its full form (100 task runs).
const EnvChaosFull = "AGENTRY_CHAOS_FULL"

// deliverySink records every POST by its X-Agentry-Delivery id.
type deliverySink struct {
	mu    sync.Mutex
	posts map[string]map[string]int // path -> delivery id -> POSTs
	srv   *httptest.Server
}

func newDeliverySink(t *testing.T) *deliverySink {
	d := &deliverySink{posts: map[string]map[string]int{}}
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		d.mu.Lock()
		if d.posts[r.URL.Path] == nil {
			d.posts[r.URL.Path] = map[string]int{}
		}
		d.posts[r.URL.Path][r.Header.Get("X-Agentry-Delivery")]++
		d.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(d.srv.Close)
	return d
}

// ids is the number of distinct delivery ids received on path and the POSTs
// beyond the first of an id (retries of an attempt whose answer was lost).
func (d *deliverySink) ids(path string) (distinct, repeats int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, n := range d.posts[path] {
		distinct++
		repeats += n - 1
	}
	return distinct, repeats
}

// TestScaleChaos runs the scale topology on this machine: Temporal on
// PostgreSQL as its own process (agentryd dev temporal --postgres), the
// application on PostgreSQL, two gateways and two workers, under a mixed
// load (chats, task runs with a tool call each, a schedule firing every 2 s
// into the webhook channel, a run.finished event hook to a receiver). It
// SIGKILLs one gateway, then one worker, then the Temporal process,
// restarting each, and asserts: every task run finishes; the ledger has a
// row per provider call (none paid twice, none unpaid); every hook event
// is handed to one delivery and arrives under its id; the schedule fires and
// its replies are delivered; the singleton leases have one holder each.
//
// The suite's form runs 12 task runs; AGENTRY_CHAOS_FULL=1 runs 100.
func TestScaleChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs agentryd, Temporal and PostgreSQL")
	}
	runs := 12
	if os.Getenv(EnvChaosFull) == "1" {
		runs = 100
	}
	began := time.Now()
	bin := gatewaytest.Binary(t, "agentryd")
	appDSN := testenv.Postgres(t)
	tmainDSN, tvisDSN := testenv.Postgres(t), testenv.Postgres(t)

	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	// Turns of task runs take 2 s, so runs are in flight at every kill.
	slow := fakellm.Duration(2 * time.Second)
	fake.Script(
		fakellm.Rule{Contains: "wrote", Delay: slow, Reply: "Report written."},
		fakellm.Rule{Contains: "Chaos task", Delay: slow, ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": "report.md", "content": "chaos\n"})}},
		fakellm.Rule{Contains: "tick", Reply: "tock"},
		fakellm.Rule{Contains: "chat", Reply: "hello"},
	)
	sink := newDeliverySink(t)

	agents := t.TempDir()
	os.WriteFile(filepath.Join(agents, "writer.yaml"), []byte("id: writer\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\n"), 0o644)
	os.WriteFile(filepath.Join(agents, "chatty.yaml"), []byte("id: chatty\nllm: {provider: ollama, model: llama3.2}\n"), 0o644)
	os.WriteFile(filepath.Join(agents, "ticker.yaml"), []byte("id: ticker\ntrigger: cron\nllm: {provider: ollama, model: llama3.2}\nschedule:\n  cron: \"@every 2s\"\n  prompt: tick\n  output: {channel: webhook}\n"), 0o644)

	// Temporal on PostgreSQL, its own process on a fixed port (restarted on it).
	tenv, _, _ := gatewayEnv(t, t.TempDir())
	tenv["AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED"] = "false"
	tenv["AGENTRY_TEMPORAL_POSTGRES_DSN"] = tmainDSN
	tenv["AGENTRY_TEMPORAL_POSTGRES_VISIBILITY_DSN"] = tvisDSN
	taddr := "127.0.0.1:" + tenv["AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT"]
	startTemporal := func() *gatewaytest.Process {
		p := gatewaytest.StartProcess(t, bin, tenv, "dev", "temporal")
		waitTCP(t, taddr, 90*time.Second, p)
		return p
	}
	temporal := startTemporal()

	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`runtime:
  ssrf: {enabled: true, allow_loopback: true}
  delivery: {initial_interval: 100ms, max_interval: 1s, retry_for: 5m, attempt_timeout: 5s}
costs:
  reservation_ttl: 4s
  enforcement_mode: hard
  daily_budget_usd: 50.00
  pricing:
    ollama/llama3.2: {input_per_mtok: 1, output_per_mtok: 2, source: test, version: t1, effective_date: "2024-01-01"}
channels:
  webhook: {enabled: true, url: %q}
hooks:
  - on: ["run.finished"]
    agents: [writer]
    url: %q
    secret_env: AGENTRY_TEST_HOOK_SECRET
`, sink.srv.URL+"/channel", sink.srv.URL+"/hook")), 0o644)
	const key = "chaos-key-0123456789abcdef"
	procEnv := func() (map[string]string, string) {
		env, port, _ := gatewayEnv(t, t.TempDir())
		env["AGENTRY_CONFIG_PATH"] = cfgPath
		env["AGENTRY_TEMPORAL_ADDRESS"] = taddr
		env["AGENTRY_STORAGE_BACKEND"] = "postgres"
		env["AGENTRY_STORAGE_DSN"] = appDSN
		env["AGENTRY_SERVER_API_KEY"] = key
		env["AGENTRY_AGENT_DIRS"] = agents
		env["AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL"] = fake.URL()
		env["AGENTRY_TEST_HOOK_SECRET"] = "chaos-hook-secret"
		return env, fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	type proc struct {
		env  map[string]string
		base string
		args []string
		p    *gatewaytest.Process
	}
	start := func(pr *proc) {
		pr.p = gatewaytest.StartProcess(t, bin, pr.env, pr.args...)
		if len(pr.args) == 0 {
			gatewaytest.WaitHTTP(t, pr.base+"/health", 90*time.Second, pr.p)
		}
	}
	var gws, wks []*proc
	for range 2 {
		env, base := procEnv()
		g := &proc{env: env, base: base}
		start(g)
		gws = append(gws, g)
	}
	for range 2 {
		env, base := procEnv()
		w := &proc{env: env, base: base, args: []string{"worker"}}
		start(w)
		wks = append(wks, w)
	}
	t.Logf("topology up in %s", time.Since(began).Round(time.Millisecond))

	// Task runs, alternately through both gateways.
	type runRef struct{ task, run int64 }
	var refs []runRef
	for i := range runs {
		base := gws[i%2].base
		task := wbCall(t, base, key, "POST", wb+"/tasks", map[string]any{"title": fmt.Sprintf("Chaos task %d", i), "agent_id": "writer"})
		if task.Status != 201 {
			t.Fatalf("create task: %d %s", task.Status, task.Raw)
		}
		tid := int64(task.JSON["id"].(float64))
		run := wbCall(t, base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, tid), nil)
		if run.Status != 202 {
			t.Fatalf("start run: %d %s", run.Status, run.Raw)
		}
		refs = append(refs, runRef{tid, int64(run.JSON["id"].(float64))})
	}
	// Chats in the background through whichever gateway is up.
	stopChats := make(chan struct{})
	var chatWG sync.WaitGroup
	var chatMu sync.Mutex
	chatOK, chatFailed := 0, 0
	chatWG.Add(1)
	go func() {
		defer chatWG.Done()
		client := &http.Client{Timeout: 10 * time.Second}
		for i := 0; ; i++ {
			select {
			case <-stopChats:
				return
			case <-time.After(150 * time.Millisecond):
			}
			req, _ := http.NewRequest("POST", gws[i%2].base+"/api/v1/chat", strings.NewReader(fmt.Sprintf(`{"agent_id":"chatty","user_id":"u%d","text":"chat %d"}`, i, i)))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			chatMu.Lock()
			if err == nil && resp.StatusCode == 200 {
				chatOK++
			} else {
				chatFailed++
			}
			chatMu.Unlock()
			if err == nil {
				resp.Body.Close()
			}
		}
	}()

	finished := func() int {
		n := 0
		for _, r := range refs {
			res := wbCall(t, gws[1].base, key, "GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, r.task, r.run), nil)
			if res.JSON["status"] == "finished" {
				n++
			}
		}
		return n
	}
	kill := func(what string, pr *proc) {
		pr.p.Kill(t)
		t.Logf("%s: SIGKILLed (%d provider calls so far, %d of %d runs finished)", what, fake.CallCount(), finished(), runs)
		time.Sleep(time.Second)
		start(pr)
		t.Logf("%s: restarted", what)
	}
	kill("gateway 1", gws[0])
	kill("worker 1", wks[0])
	temporal.Kill(t)
	t.Logf("temporal: SIGKILLed (%d provider calls so far, %d of %d runs finished)", fake.CallCount(), finished(), runs)
	// With Temporal gone, starting a run is a 503 with Retry-After that
	// changes nothing; once it is back, the same request succeeds without
	// restarting the gateway.
	late := wbCall(t, gws[1].base, key, "POST", wb+"/tasks", map[string]any{"title": fmt.Sprintf("Chaos task %d", runs), "agent_id": "writer"})
	if late.Status != 201 {
		t.Fatalf("create task with Temporal down: %d %s", late.Status, late.Raw)
	}
	lateID := int64(late.JSON["id"].(float64))
	down := wbCall(t, gws[1].base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, lateID), nil)
	if down.Status != 503 || down.Header.Get("Retry-After") == "" {
		t.Errorf("start a run with Temporal down: %d (Retry-After %q) %s, want 503 with Retry-After", down.Status, down.Header.Get("Retry-After"), down.Raw)
	}
	temporal = startTemporal()
	t.Logf("temporal: restarted")
	for deadline := time.Now().Add(60 * time.Second); ; {
		up := wbCall(t, gws[1].base, key, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, lateID), nil)
		if up.Status == 202 {
			refs = append(refs, runRef{lateID, int64(up.JSON["id"].(float64))})
			runs++
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("start a run after Temporal came back: %d %s", up.Status, up.Raw)
		}
		time.Sleep(500 * time.Millisecond)
	}

	deadline := time.Now().Add(3 * time.Minute)
	for finished() < runs {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d task runs finished\ngateway 2:\n%s", finished(), runs, gws[1].p.Output)
		}
		time.Sleep(500 * time.Millisecond)
	}
	loadDone := time.Since(began)
	close(stopChats)
	chatWG.Wait()

	// Every hook event arrives (one delivery id per finished run); the
	// sweepers may need a pass after the Temporal restart.
	deadline = time.Now().Add(2 * time.Minute)
	for {
		if n, _ := sink.ids("/hook"); n >= runs {
			break
		}
		if time.Now().After(deadline) {
			n, _ := sink.ids("/hook")
			t.Fatalf("hook deliveries: %d distinct ids for %d finished runs", n, runs)
		}
		time.Sleep(200 * time.Millisecond)
	}

	ctx := context.Background()
	db, err := pgx.Connect(ctx, appDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	count := func(q string, args ...any) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var n int
		if err := db.QueryRow(ctx, q, args...).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// The ledger settles a call right after its answer: wait for the last.
	// Provider calls by what asked: chats ("chat N"), firings ("tick"),
	// task-run turns (the task's prompt, then the tool result).
	byKind := func() map[string]int {
		n := map[string]int{}
		for _, c := range fake.Calls() {
			switch {
			case strings.HasPrefix(c.LastUserMessage, "chat"):
				n["chat"]++
			case strings.HasPrefix(c.LastUserMessage, "tick"):
				n["scheduled"]++
			default:
				n["task"]++
			}
		}
		return n
	}
	ledgerBy := func() map[string]int {
		n := map[string]int{}
		rows, err := db.Query(ctx, "SELECT source, count(*) FROM cost_ledger GROUP BY source")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var src string
			var c int
			_ = rows.Scan(&src, &c)
			n[src] = c
		}
		return n
	}
	paidTurns := func() int {
		return count("SELECT count(*) FROM cost_ledger WHERE source = 'task' AND outcome = 'succeeded'")
	}
	// The ledger settles a call right after its answer: wait for the last.
	var ledger, calls map[string]int
	var paid int
	for deadline := time.Now().Add(30 * time.Second); ; {
		ledger, calls, paid = ledgerBy(), byKind(), paidTurns()
		if (ledger["chat"] == calls["chat"] && ledger["scheduled"] == calls["scheduled"] && ledger["task"] >= calls["task"] && paid >= 2*runs) ||
			time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Chats and firings: a ledger row per provider call.
	for _, k := range []string{"chat", "scheduled"} {
		if ledger[k] != calls[k] {
			t.Errorf("%s: ledger rows %d, provider calls %d: want a row per call", k, ledger[k], calls[k])
		}
	}
	// Task runs: a ledger row per provider call too. A turn in flight at a
	// kill is asked again: the interrupted call keeps its row (priced by
	// the reaper at its reserved worst case, estimated), the repetition
	// has its own (<call id>-r2); every finished turn is settled as
	// answered once (two turns a run: the tool call, the reply). A call
	// admitted but killed before its request left has a row the provider
	// never saw (rows may exceed calls by those, never fall short).
	if ledger["task"] < calls["task"] {
		t.Errorf("task runs: %d ledger rows, %d provider calls: a call without a row", ledger["task"], calls["task"])
	}
	// A turn answered by the provider is paid twice only when its first
	// execution was cut between the answer and the run log's write (a kill
	// in that window, or a workflow task that timed out on a starved
	// machine while its step still ran): the retry finds no stored answer
	// and asks again. Both are real provider calls, so both rows are
	// right; the extra one must be such a repetition (<call id>-rN), and a
	// turn whose answer was stored is never asked again (Answered).
	repeatsPaid := count(`SELECT count(*) FROM cost_ledger WHERE source = 'task' AND outcome = 'succeeded' AND call_id ~ '-r[0-9]+$'`)
	if paid < 2*runs {
		t.Errorf("task runs: %d turns settled as answered, want %d (2 turns x %d runs)", paid, 2*runs, runs)
	} else if extra := paid - 2*runs; extra > repeatsPaid {
		t.Errorf("task runs: %d turns settled as answered, %d more than 2 x %d runs, but only %d answered repetitions (-rN): a turn paid twice under one execution", paid, extra, runs, repeatsPaid)
	} else if extra > 0 {
		t.Logf("task runs: %d turns answered twice (cut between the provider's answer and the run log's write)", extra)
	}
	repeated := calls["task"] - 2*runs
	if repeated < 0 {
		t.Errorf("task runs: fewer provider calls (%d) than finished turns (%d)", calls["task"], 2*runs)
	}
	const budgetMicros = 50_000_000
	if spent := count("SELECT coalesce(sum(cost_micros), 0) FROM cost_ledger"); spent > budgetMicros {
		t.Errorf("spend %d micros over the %d budget", spent, budgetMicros)
	}
	if dup := count("SELECT count(*) FROM (SELECT call_id FROM cost_ledger GROUP BY call_id HAVING count(*) > 1) d"); dup != 0 {
		t.Errorf("%d provider calls paid twice", dup)
	}
	hookIDs, hookRepeats := sink.ids("/hook")
	if hookIDs != runs {
		t.Errorf("hook deliveries: %d distinct ids, want %d (one per finished run)", hookIDs, runs)
	}
	// One delivery per event: no event was handed to two deliveries (the
	// hook cursor is one singleton, not one per process).
	if recorded := count("SELECT count(*) FROM deliveries WHERE channel LIKE 'hook:%'"); recorded != runs {
		t.Errorf("hook deliveries recorded: %d, want %d (one per run.finished event)", recorded, runs)
	}
	chanIDs, chanRepeats := sink.ids("/channel")
	firings := count("SELECT count(*) FROM schedule_runs WHERE agent_id = 'ticker' AND status = 'succeeded'")
	if firings == 0 || chanIDs == 0 {
		t.Errorf("schedule: %d succeeded firings, %d channel deliveries received", firings, chanIDs)
	}
	// Singleton work: each duty's lease is one row (one holder at a time).
	if n := count("SELECT count(DISTINCT name) FROM singleton_leases"); n < 5 {
		t.Errorf("singleton leases: %d, want the 5 default duties", n)
	}
	t.Logf("figures: %d task runs (%d turns' provider calls), %d chats ok / %d refused or failed during kills, %d firings, "+
		"%d hook deliveries (%d repeated POSTs of an id), %d channel deliveries (%d repeated), ledger %v, provider calls %v (%d turns in flight at a kill asked again); load done in %s",
		runs, calls["task"], chatOK, chatFailed, firings, hookIDs, hookRepeats, chanIDs, chanRepeats, ledger, calls, repeated, loadDone.Round(time.Millisecond))
	_ = temporal
}
