package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

// EnvBenchScale runs TestBenchScaleTopology (docs/benchmarks.md, "Scale topology").
const EnvBenchScale = "AGENTRY_BENCH_SCALE"

// benchProc is one process of a measured topology, with its role.
type benchProc struct {
	role string
	p    *gatewaytest.Process
}

// cpuSeconds is a process's user+system CPU time so far (/proc/<pid>/stat
// fields 14 and 15, in clock ticks of 100 Hz, the Linux default).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	// The command (field 2) is in parentheses and may hold spaces.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// dbStat is pg_stat_database's committed transactions and tuple writes
// (inserted+updated+deleted) summed over some databases.
type dbStat struct{ commits, writes float64 }

// benchSnap is everything measured at one instant.
type benchSnap struct {
	at        time.Time
	cpu       map[string]float64
	app, temp dbStat
}

// statsSettle is longer than PostgreSQL's idle statistics flush interval
// (PGSTAT_IDLE_INTERVAL, 10 s), so a snapshot taken after it holds every
// write of the phase before.
const statsSettle = 11 * time.Second

type benchTopo struct {
	name      string
	procs     []benchProc
	gateways  []string
	stats     *pgx.Conn // any connection to the PostgreSQL server; nil on SQLite
	appDB     string
	tempDBs   []string
	agentsDir string
	idle0     benchSnap // the idle window: background rates subtracted from phases
	idle1     benchSnap
}

func (tp *benchTopo) pg(t *testing.T, names ...string) dbStat {
	t.Helper()
	var s dbStat
	if tp.stats == nil {
		return s
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tp.stats.QueryRow(ctx, `SELECT coalesce(sum(xact_commit),0)::float8, coalesce(sum(tup_inserted+tup_updated+tup_deleted),0)::float8
		FROM pg_stat_database WHERE datname = ANY($1)`, names).Scan(&s.commits, &s.writes); err != nil {
		t.Fatal(err)
	}
	return s
}

func (tp *benchTopo) snap(t *testing.T) benchSnap {
	s := benchSnap{at: time.Now(), cpu: map[string]float64{}}
	for _, p := range tp.procs {
		s.cpu[p.role] += cpuSeconds(p.p.Cmd.Process.Pid)
	}
	if tp.stats != nil {
		s.app, s.temp = tp.pg(t, tp.appDB), tp.pg(t, tp.tempDBs...)
	}
	return s
}

// phase is one measured load: units done in dur, per-unit costs with the
// idle background rate subtracted.
type phase struct {
	units     int
	dur       time.Duration
	cpu       map[string]float64 // CPU seconds per unit, by role
	appCommit float64            // per unit
	appWrite  float64
	tmpCommit float64
	tmpWrite  float64
}

func (tp *benchTopo) measure(t *testing.T, work func() int) phase {
	s0 := tp.snap(t)
	began := time.Now()
	n := work()
	dur := time.Since(began)
	time.Sleep(statsSettle)
	s1 := tp.snap(t)
	return tp.per(s0, s1, n, dur)
}

func (tp *benchTopo) per(s0, s1 benchSnap, n int, dur time.Duration) phase {
	span := s1.at.Sub(s0.at).Seconds()
	idle := tp.idle1.at.Sub(tp.idle0.at).Seconds()
	bg := func(a0, a1 float64) float64 { return (a1 - a0) / idle * span }
	ph := phase{units: n, dur: dur, cpu: map[string]float64{}}
	if n == 0 {
		return ph
	}
	u := float64(n)
	for role, c1 := range s1.cpu {
		ph.cpu[role] = (c1 - s0.cpu[role] - bg(tp.idle0.cpu[role], tp.idle1.cpu[role])) / u
	}
	ph.appCommit = (s1.app.commits - s0.app.commits - bg(tp.idle0.app.commits, tp.idle1.app.commits)) / u
	ph.appWrite = (s1.app.writes - s0.app.writes - bg(tp.idle0.app.writes, tp.idle1.app.writes)) / u
	ph.tmpCommit = (s1.temp.commits - s0.temp.commits - bg(tp.idle0.temp.commits, tp.idle1.temp.commits)) / u
	ph.tmpWrite = (s1.temp.writes - s0.temp.writes - bg(tp.idle0.temp.writes, tp.idle1.temp.writes)) / u
	return ph
}

func (ph phase) String() string {
	var roles []string
	for r := range ph.cpu {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	var cpu []string
	for _, r := range roles {
		cpu = append(cpu, fmt.Sprintf("%s %.1f ms", r, ph.cpu[r]*1000))
	}
	return fmt.Sprintf("%d in %s = %.2f/s; CPU per unit: %s; app DB per unit: %.1f commits, %.1f row writes; Temporal DB per unit: %.1f commits, %.1f row writes",
		ph.units, ph.dur.Round(time.Millisecond), float64(ph.units)/ph.dur.Seconds(), strings.Join(cpu, ", "),
		ph.appCommit, ph.appWrite, ph.tmpCommit, ph.tmpWrite)
}

const benchKey = "bench-key-0123456789abcdef"

// TestBenchScaleTopology measures, in one run, finished task runs/s and
// chat requests/s on the single-node topology (embedded Temporal, SQLite),
// one gateway against Temporal on PostgreSQL, and the scale topology (two
// API-only gateways, Temporal on PostgreSQL, application PostgreSQL) with 1
// and 2 workers; CPU seconds per task run and per chat by role (from
// /proc/<pid>/stat); PostgreSQL commits and row writes per unit for the
// application and the Temporal databases (pg_stat_database deltas, idle
// background subtracted); and, on the scale topology, per schedule firing.
//
//	AGENTRY_BENCH_SCALE=1 go test ./e2e -run TestBenchScaleTopology -count=1 -v
func TestBenchScaleTopology(t *testing.T) {
	if os.Getenv(EnvBenchScale) != "1" {
		t.Skip("set AGENTRY_BENCH_SCALE=1 (a load run of several minutes)")
	}
	runs, chats := 40, 200
	if v, err := strconv.Atoi(os.Getenv("AGENTRY_BENCH_RUNS")); err == nil && v > 0 {
		runs = v
	}
	if v, err := strconv.Atoi(os.Getenv("AGENTRY_BENCH_CHATS")); err == nil && v > 0 {
		chats = v
	}
	bin := gatewaytest.Binary(t, "agentryd")
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "Report written."},
		fakellm.Rule{Contains: "Bench task", ToolCalls: []fakellm.ToolCall{fakellm.NewToolCall("write_file", map[string]string{"path": "report.md", "content": "bench\n"})}},
		fakellm.Rule{Contains: "tick", Reply: "tock"},
		fakellm.Rule{Contains: "chat", Reply: "hello"},
	)
	sink := newDeliverySink(t)
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`runtime:
  ssrf: {enabled: true, allow_loopback: true}
costs:
  pricing:
    ollama/llama3.2: {input_per_mtok: 1, output_per_mtok: 2, source: test, version: t1, effective_date: "2024-01-01"}
channels:
  webhook: {enabled: true, url: %q}
`, sink.srv.URL+"/channel")), 0o644)

	type result struct {
		name            string
		runs, chats, fi phase
	}
	var results []result
	for _, kind := range []string{"single", "single-pg", "scale-1w", "scale-2w"} {
		tp := benchStart(t, bin, kind, cfgPath, fake.URL())
		t.Logf("%s: up; idle window", kind)
		time.Sleep(statsSettle)
		tp.idle0 = tp.snap(t)
		time.Sleep(statsSettle)
		tp.idle1 = tp.snap(t)
		r := result{name: kind}
		r.runs = tp.measure(t, func() int { return benchRuns(t, tp, runs) })
		t.Logf("%s: task runs: %s", kind, r.runs)
		r.chats = tp.measure(t, func() int { return benchChats(t, tp, chats) })
		t.Logf("%s: chats: %s", kind, r.chats)
		if kind == "scale-1w" {
			r.fi = benchFirings(t, tp)
			t.Logf("%s: firings: %s", kind, r.fi)
		}
		results = append(results, r)
		for _, p := range tp.procs {
			p.p.Stop()
		}
		if tp.stats != nil {
			tp.stats.Close(context.Background())
		}
	}
	base := results[0]
	for _, r := range results {
		t.Logf("ratio %s / single: task runs/s %.2f, chats/s %.2f", r.name,
			(float64(r.runs.units)/r.runs.dur.Seconds())/(float64(base.runs.units)/base.runs.dur.Seconds()),
			(float64(r.chats.units)/r.chats.dur.Seconds())/(float64(base.chats.units)/base.chats.dur.Seconds()))
	}
}

// benchStart starts a topology: single (one agentryd, embedded Temporal,
// SQLite), single-pg (Temporal on PostgreSQL, one gateway on application
// PostgreSQL), scale-Nw (Temporal on PostgreSQL, two API-only gateways, N
// workers).
func benchStart(t *testing.T, bin, kind, cfgPath, llmURL string) *benchTopo {
	tp := &benchTopo{name: kind, agentsDir: t.TempDir()}
	os.WriteFile(filepath.Join(tp.agentsDir, "writer.yaml"), []byte("id: writer\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\n"), 0o644)
	os.WriteFile(filepath.Join(tp.agentsDir, "chatty.yaml"), []byte("id: chatty\nllm: {provider: ollama, model: llama3.2}\n"), 0o644)
	procEnv := func() (map[string]string, string) {
		env, port, _ := gatewayEnv(t, t.TempDir())
		env["AGENTRY_CONFIG_PATH"] = cfgPath
		env["AGENTRY_SERVER_API_KEY"] = benchKey
		env["AGENTRY_AGENT_DIRS"] = tp.agentsDir
		env["AGENTRY_LLM_PROVIDERS_OLLAMA_BASE_URL"] = llmURL
		env["AGENTRY_TEMPORAL_EMBEDDED_UI_ENABLED"] = "false"
		env["AGENTRY_LOG_LEVEL"] = "warn"
		return env, fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	if kind == "single" {
		env, base := procEnv()
		p := gatewaytest.StartProcess(t, bin, env)
		gatewaytest.WaitHTTP(t, base+"/health", 120*time.Second, p)
		tp.procs = append(tp.procs, benchProc{"gateway+temporal", p})
		tp.gateways = []string{base}
		return tp
	}
	appDSN := testenv.Postgres(t)
	tmainDSN, tvisDSN := testenv.Postgres(t), testenv.Postgres(t)
	for _, d := range []string{tmainDSN, tvisDSN} {
		c, err := pgx.ParseConfig(d)
		if err != nil {
			t.Fatal(err)
		}
		tp.tempDBs = append(tp.tempDBs, c.Database)
	}
	ac, err := pgx.ParseConfig(appDSN)
	if err != nil {
		t.Fatal(err)
	}
	tp.appDB = ac.Database
	if tp.stats, err = pgx.Connect(context.Background(), appDSN); err != nil {
		t.Fatal(err)
	}
	tenv, _ := procEnv()
	tenv["AGENTRY_TEMPORAL_POSTGRES_DSN"] = tmainDSN
	tenv["AGENTRY_TEMPORAL_POSTGRES_VISIBILITY_DSN"] = tvisDSN
	taddr := "127.0.0.1:" + tenv["AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT"]
	tprc := gatewaytest.StartProcess(t, bin, tenv, "dev", "temporal")
	waitTCP(t, taddr, 120*time.Second, tprc)
	tp.procs = append(tp.procs, benchProc{"temporal", tprc})
	start := func(role string, workerEnabled bool, args ...string) {
		env, base := procEnv()
		env["AGENTRY_TEMPORAL_ADDRESS"] = taddr
		env["AGENTRY_STORAGE_BACKEND"] = "postgres"
		env["AGENTRY_STORAGE_DSN"] = appDSN
		if !workerEnabled {
			env["AGENTRY_TEMPORAL_WORKER_ENABLED"] = "false"
		}
		p := gatewaytest.StartProcess(t, bin, env, args...)
		if len(args) == 0 {
			gatewaytest.WaitHTTP(t, base+"/health", 120*time.Second, p)
			tp.gateways = append(tp.gateways, base)
		}
		tp.procs = append(tp.procs, benchProc{role, p})
	}
	switch kind {
	case "single-pg":
		start("gateway", true)
	case "scale-1w", "scale-2w":
		start("api", false)
		start("api", false)
		workers := 1
		if kind == "scale-2w" {
			workers = 2
		}
		for range workers {
			start("worker", true, "worker")
		}
	}
	return tp
}

// benchRuns starts n task runs through the gateways in turn and waits for
// all to finish; it returns the number finished.
func benchRuns(t *testing.T, tp *benchTopo, n int) int {
	type ref struct{ task, run int64 }
	var refs []ref
	for i := range n {
		base := tp.gateways[i%len(tp.gateways)]
		task := wbCall(t, base, benchKey, "POST", wb+"/tasks", map[string]any{"title": fmt.Sprintf("Bench task %d", i), "agent_id": "writer"})
		if task.Status != 201 {
			t.Fatalf("create task: %d %s", task.Status, task.Raw)
		}
		tid := int64(task.JSON["id"].(float64))
		run := wbCall(t, base, benchKey, "POST", fmt.Sprintf("%s/tasks/%d/run", wb, tid), nil)
		if run.Status != 202 {
			t.Fatalf("start run: %d %s", run.Status, run.Raw)
		}
		refs = append(refs, ref{tid, int64(run.JSON["id"].(float64))})
	}
	done := map[int]bool{}
	for deadline := time.Now().Add(5 * time.Minute); len(done) < n; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d task runs finished", tp.name, len(done), n)
		}
		for i, r := range refs {
			if done[i] {
				continue
			}
			res := wbCall(t, tp.gateways[0], benchKey, "GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, r.task, r.run), nil)
			switch res.JSON["status"] {
			case "finished":
				done[i] = true
			case "failed", "cancelled":
				t.Fatalf("%s: run %d %v: %s", tp.name, r.run, res.JSON["status"], res.Raw)
			}
		}
	}
	return len(done)
}

// benchChats sends n chats, 8 at a time, through the gateways in turn; it
// returns the number answered 200.
func benchChats(t *testing.T, tp *benchTopo, n int) int {
	var mu sync.Mutex
	ok := 0
	next := make(chan int)
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 60 * time.Second}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				req, _ := http.NewRequest("POST", tp.gateways[i%len(tp.gateways)]+"/api/v1/chat", strings.NewReader(fmt.Sprintf(`{"agent_id":"chatty","user_id":"u%d","text":"chat %d"}`, i%50, i)))
				req.Header.Set("Authorization", "Bearer "+benchKey)
				req.Header.Set("Content-Type", "application/json")
				resp, err := client.Do(req)
				if err != nil {
					continue
				}
				resp.Body.Close()
				if resp.StatusCode == 200 {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if ok < n {
		t.Errorf("%s: %d of %d chats answered", tp.name, ok, n)
	}
	return ok
}

// benchFirings adds a schedule firing every second for about 15 s and
// measures per firing (PostgreSQL topologies: firings counted in
// schedule_runs).
func benchFirings(t *testing.T, tp *benchTopo) phase {
	ctx := context.Background()
	count := func() int {
		var n int
		if err := tp.stats.QueryRow(ctx, "SELECT count(*) FROM schedule_runs WHERE agent_id = 'ticker'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	path := filepath.Join(tp.agentsDir, "ticker.yaml")
	os.WriteFile(path, []byte("id: ticker\ntrigger: cron\nllm: {provider: ollama, model: llama3.2}\nschedule:\n  cron: \"@every 1s\"\n  prompt: tick\n  output: {channel: webhook}\n"), 0o644)
	for deadline := time.Now().Add(60 * time.Second); count() == 0; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the schedule never fired", tp.name)
		}
	}
	s0 := tp.snap(t)
	n0 := count()
	began := time.Now()
	time.Sleep(15 * time.Second)
	os.Remove(path)
	dur := time.Since(began)
	time.Sleep(statsSettle) // the schedule is deleted by the next sync; its last firings land in here
	s1 := tp.snap(t)
	return tp.per(s0, s1, count()-n0, dur)
}
