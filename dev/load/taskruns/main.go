// Command taskruns is a load test of workboard task runs: it creates N
// tasks, starts all their runs at once against the scripted fake provider
// and reports finished runs per second, the latency from each 202 to its
// run.finished event (read from GET /api/v1/events), and the gateway's
// memory.
//
// Without -url it starts everything in this process: the fake provider,
// the embedded Temporal server (SQLite, free ports) and a gateway on a
// temporary workspace; the memory figures are then this process's. With
// -url it targets a running gateway whose agent -agent must exist (and
// -pid names the gateway process for the memory figures).
//
//	go run ./dev/load/taskruns -n 200
//	go run ./dev/load/taskruns -n 200 -url http://127.0.0.1:18789 -key $KEY -agent writer -pid $(pgrep agentryd)
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/gateway"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/procs"
	"github.com/agentryhq/agentry/internal/temporalserver"
)

func main() {
	n := flag.Int("n", 200, "number of tasks to run concurrently")
	url := flag.String("url", "", "target gateway base URL (default: start one in this process)")
	key := flag.String("key", "", "API key of the target gateway")
	agentID := flag.String("agent", "writer", "agent of the tasks (with -url it must exist)")
	tool := flag.Bool("tool", true, "in-process gateway: each run writes a file (LLM turn, tool call, LLM turn) instead of answering in one turn")
	pid := flag.Int("pid", 0, "with -url: process id of the gateway, for its memory")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	verbose := flag.Bool("v", false, "log the in-process gateway")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (in-process gateway) to the file")
	adaptiveProcs := flag.Bool("adaptive-procs", true, "in-process gateway: adapt GOMAXPROCS to the load as agentryd does (server.adaptive_procs)")
	dynConfig := map[string]any{}
	flag.Func("dc", "in-process gateway: override a Temporal dynamic config key, `key=value` (YAML value; repeatable), to compare settings", func(kv string) error {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return errors.New("want key=value")
		}
		var val any
		if err := yaml.Unmarshal([]byte(v), &val); err != nil {
			return err
		}
		dynConfig[k] = val
		return nil
	})
	flag.Parse()

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	base, apiKey := *url, *key
	if base == "" {
		g, stop, err := startGateway(ctx, *tool, *verbose, dynConfig)
		if err != nil {
			fail(err)
		}
		defer stop()
		base, apiKey = g.URL(), g.APIKey
		*pid = os.Getpid()
		if *adaptiveProcs {
			procs.Start(ctx, nil)
		}
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := run(ctx, base, apiKey, *agentID, *n, *pid)
	if err != nil {
		fail(err)
	}
	res.print(os.Stdout, *pid)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "taskruns:", err)
	os.Exit(1)
}

// startGateway starts the fake provider, the embedded Temporal server and
// a gateway in this process.
func startGateway(ctx context.Context, tool, verbose bool, dynConfig map[string]any) (*gateway.Gateway, func(), error) {
	log := slog.New(slog.DiscardHandler)
	if verbose {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ws, err := os.MkdirTemp("", "agentry-load-")
	if err != nil {
		return nil, nil, err
	}
	var stops []func()
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		os.RemoveAll(ws)
	}
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		stop()
		return nil, nil, err
	}
	stops = append(stops, fake.Close)
	if tool {
		fake.Script(
			fakellm.Rule{Contains: "wrote", Reply: "Done: the file is written."},
			fakellm.Rule{Contains: "Load task", ToolCalls: []fakellm.ToolCall{
				fakellm.NewToolCall("write_file", map[string]string{"path": "result.md", "content": "# result\n"})}},
		)
	}

	topts, err := temporalserver.LoadDefaults()
	if err != nil {
		stop()
		return nil, nil, err
	}
	topts.DataDir = filepath.Join(ws, "temporal")
	topts.FrontendPort, topts.UIPort, topts.UIEnabled = 0, 0, false
	topts.Logger = log
	if topts.DynamicConfig == nil {
		topts.DynamicConfig = map[string]any{}
	}
	for k, v := range dynConfig {
		topts.DynamicConfig[k] = v
	}
	srv, err := temporalserver.Start(ctx, topts)
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("start Temporal: %w", err)
	}
	stops = append(stops, func() { srv.Stop() })

	agentDir := filepath.Join(ws, "agents")
	os.MkdirAll(agentDir, 0o755)
	if err := os.WriteFile(filepath.Join(agentDir, "writer.yaml"),
		[]byte("id: writer\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\n"), 0o644); err != nil {
		stop()
		return nil, nil, err
	}
	cfg := config.Defaults()
	yaml := fmt.Sprintf(`
server: {port: 0, api_key: load-test-key-0123456789}
temporal: {address: %q}
llm:
  default_provider: ollama
  providers:
    # local: the fake is on loopback and unpriced; costs.unknown_pricing
    # (block by default) refuses unpriced models of providers not local.
    ollama: {type: ollama, base_url: %q, default_model: llama3.2, local: true}
log: {level: warn}
`, srv.FrontendAddress(), fake.URL())
	if err := config.Parse([]byte(yaml), "load.yaml", &cfg); err != nil {
		stop()
		return nil, nil, err
	}
	if err := config.Validate(&cfg); err != nil {
		stop()
		return nil, nil, err
	}
	loaded := &config.Loaded{Config: cfg, Workspace: config.Workspace{Root: ws}, StartDir: ws}
	g, err := gateway.Start(ctx, gateway.Options{Config: loaded, Logger: log, Version: "load", Notice: io.Discard})
	if err != nil {
		stop()
		return nil, nil, err
	}
	stops = append(stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		g.Shutdown(sctx)
	})
	return g, stop, nil
}

type client struct {
	base, key string
	http      *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body any, out any) (int, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		_ = json.Unmarshal(raw, out)
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(raw)))
	}
	return resp.StatusCode, nil
}

type endEvent struct {
	runID int64
	typ   string
	at    time.Time
}

// follow reads run.finished and run.failed events from the stream.
func (c *client) follow(ctx context.Context, out chan<- endEvent) error {
	req, _ := http.NewRequestWithContext(ctx, "GET", c.base+"/api/v1/events?type=run.finished,run.failed,run.cancelled", nil)
	req.Header.Set("Authorization", "Bearer "+c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		resp.Body.Close()
		return fmt.Errorf("GET /events: %d", resp.StatusCode)
	}
	go func() {
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type  string `json:"type"`
				RunID int64  `json:"run_id"`
			}
			if json.Unmarshal([]byte(data), &ev) == nil {
				if ev.Type == "run.failed" && os.Getenv("TASKLOAD_DEBUG") != "" {
					fmt.Fprintln(os.Stderr, data)
				}
				select {
				case out <- endEvent{runID: ev.RunID, typ: ev.Type, at: time.Now()}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return nil
}

type result struct {
	n, finished, failed int
	setup               time.Duration
	wall                time.Duration
	latencies           []time.Duration
	startErrors         int
	// cpu is the CPU time (user+system) the gateway process used from the
	// first POST .../run to the last terminal event. Per finished run it is
	// a cost that a loaded, shared machine distorts far less than runs/s.
	cpu time.Duration
}

func run(ctx context.Context, base, key, agentID string, n, pid int) (*result, error) {
	c := &client{base: strings.TrimRight(base, "/"), key: key, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}}
	ends := make(chan endEvent, n*2)
	sctx, cancelStream := context.WithCancel(ctx)
	defer cancelStream()
	if err := c.follow(sctx, ends); err != nil {
		return nil, err
	}

	setupStart := time.Now()
	ids := make([]int64, n)
	if err := parallel(ctx, n, 32, func(i int) error {
		var t struct {
			ID int64 `json:"id"`
		}
		_, err := c.do(ctx, "POST", "/api/v1/workboard/tasks", map[string]any{"title": fmt.Sprintf("Load task %d", i), "agent_id": agentID}, &t)
		ids[i] = t.ID
		return err
	}); err != nil {
		return nil, fmt.Errorf("create tasks: %w", err)
	}
	res := &result{n: n, setup: time.Since(setupStart)}

	var mu sync.Mutex
	accepted := map[int64]time.Time{}
	cpuBefore, cpuErr := procCPU(pid)
	begin := time.Now()
	var startErrs []error
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var run struct {
				ID int64 `json:"id"`
			}
			_, err := c.do(ctx, "POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", id), nil, &run)
			now := time.Now()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				startErrs = append(startErrs, err)
				return
			}
			accepted[run.ID] = now
		}()
	}
	wg.Wait()
	res.startErrors = len(startErrs)
	if len(startErrs) > 0 {
		fmt.Fprintf(os.Stderr, "taskruns: %d run requests failed, first: %v\n", len(startErrs), startErrs[0])
	}

	// Events may arrive before their 202 was read; match them afterwards.
	done := map[int64]endEvent{}
	var last time.Time
	for len(done) < len(accepted) {
		select {
		case ev := <-ends:
			if _, dup := done[ev.runID]; dup {
				return nil, fmt.Errorf("run %d: second terminal event %s", ev.runID, ev.typ)
			}
			done[ev.runID] = ev
			last = ev.at
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d runs ended before the timeout", len(done), len(accepted))
		}
	}
	res.wall = last.Sub(begin)
	if cpuAfter, err := procCPU(pid); err == nil && cpuErr == nil {
		res.cpu = cpuAfter - cpuBefore
	}
	for runID, ev := range done {
		at, ok := accepted[runID]
		if !ok {
			continue
		}
		if ev.typ == "run.finished" {
			res.finished++
		} else {
			res.failed++
		}
		res.latencies = append(res.latencies, ev.at.Sub(at))
	}
	slices.Sort(res.latencies)
	return res, nil
}

func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	close(errs)
	return errors.Join(drain(errs)...)
}

func drain(ch <-chan error) []error {
	var out []error
	for e := range ch {
		out = append(out, e)
	}
	return out
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return sorted[i]
}

func (r *result) print(w io.Writer, pid int) {
	fmt.Fprintf(w, "tasks:            %d (created in %s)\n", r.n, r.setup.Round(time.Millisecond))
	fmt.Fprintf(w, "runs:             %d finished, %d failed, %d refused\n", r.finished, r.failed, r.startErrors)
	fmt.Fprintf(w, "wall time:        %s (first POST .../run to last run.finished)\n", r.wall.Round(time.Millisecond))
	if r.wall > 0 {
		fmt.Fprintf(w, "throughput:       %.1f finished runs/s\n", float64(r.finished)/r.wall.Seconds())
	}
	fmt.Fprintf(w, "202 -> run.finished: p50 %s, p99 %s, max %s\n", percentile(r.latencies, 0.50).Round(time.Millisecond),
		percentile(r.latencies, 0.99).Round(time.Millisecond), percentile(r.latencies, 1).Round(time.Millisecond))
	if r.cpu > 0 && r.finished > 0 {
		fmt.Fprintf(w, "gateway CPU:      %s in all, %.1f ms per finished run (user+system, pid %d)\n",
			r.cpu.Round(time.Millisecond), float64(r.cpu.Microseconds())/1000/float64(r.finished), pid)
	}
	if pid > 0 {
		if rss, hwm, err := procMemory(pid); err == nil {
			fmt.Fprintf(w, "gateway memory:   RSS %s, peak RSS %s (pid %d)\n", rss, hwm, pid)
		}
	}
	if pid == os.Getpid() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		fmt.Fprintf(w, "go heap:          %d MiB in use, %d MiB from the OS, %d goroutines (gateway, Temporal server and load client in one process)\n",
			ms.HeapInuse>>20, ms.Sys>>20, runtime.NumGoroutine())
	}
}

// procCPU reads a process's user+system CPU time from /proc/<pid>/stat
// (Linux; fields 14 and 15, in clock ticks of 1/100 s).
func procCPU(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, errors.New("no process id")
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields are counted after its ')'.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, nil
}

// procMemory reads VmRSS and VmHWM of a process (Linux).
func procMemory(pid int) (rss, hwm string, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return rss, hwm, nil
}
