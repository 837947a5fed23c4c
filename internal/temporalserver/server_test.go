package temporalserver

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/common/log/tag"
)

// testOptions are temporal.yaml's defaults on free ports in a fresh directory.
func testOptions(t *testing.T) Options {
	t.Helper()
	o, err := LoadDefaults()
	if err != nil {
		t.Fatalf("LoadDefaults: %v", err)
	}
	o.DataDir = t.TempDir()
	o.FrontendPort = 0
	o.UIPort = 0
	return o
}

func startServer(t *testing.T, o Options) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("embedded temporal started in %s at %s (ui %q)", time.Since(began).Round(time.Millisecond), s.FrontendAddress(), s.UIAddress())
	t.Cleanup(func() { _ = s.Stop() })
	return s
}

func stopServer(t *testing.T, s *Server) {
	t.Helper()
	began := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	t.Logf("embedded temporal stopped in %s", time.Since(began).Round(time.Millisecond))
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
}

func dial(t *testing.T, s *Server) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: s.FrontendAddress(), Namespace: s.Namespace()})
	if err != nil {
		t.Fatalf("dial %s: %v", s.FrontendAddress(), err)
	}
	return c
}

// echoWorkflow is the trivial workflow the test runs on a real worker.
func echoWorkflow(_ workflow.Context, in string) (string, error) {
	return "echo: " + in, nil
}

const (
	testTaskQueue  = "temporalserver-test"
	testWorkflowID = "task-42"
	extraAttribute = "AgentryTestExtra"
)

// TestRunRestartKeepHistory drives the server the way the gateway does: start,
// run a workflow with our search attributes, stop, start again on the same
// directory, and find the earlier run. One test, because each start costs
// seconds.
func TestRunRestartKeepHistory(t *testing.T) {
	o := testOptions(t)
	o.UIEnabled = true
	s := startServer(t, o)

	if s.Namespace() != "default" {
		t.Errorf("Namespace() = %q, want default", s.Namespace())
	}
	if host, _, _ := net.SplitHostPort(s.FrontendAddress()); host != "127.0.0.1" {
		t.Errorf("FrontendAddress() = %q, want host 127.0.0.1", s.FrontendAddress())
	}
	checkUI(t, s.UIAddress())

	c := dial(t, s)
	checkSearchAttributes(t, c, s.Namespace(), DefaultSearchAttributes())

	w := worker.New(c, testTaskQueue, worker.Options{})
	w.RegisterWorkflow(echoWorkflow)
	if err := w.Start(); err != nil {
		t.Fatalf("start worker: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        testWorkflowID,
		TaskQueue: testTaskQueue,
		TypedSearchAttributes: sdktemporal.NewSearchAttributes(
			sdktemporal.NewSearchAttributeKeyInt64("AgentryTaskID").ValueSet(42),
			sdktemporal.NewSearchAttributeKeyKeyword("AgentryAgentID").ValueSet("researcher"),
			sdktemporal.NewSearchAttributeKeyKeyword("AgentryTrigger").ValueSet("test"),
		),
	}, echoWorkflow, "hello")
	if err != nil {
		t.Fatalf("ExecuteWorkflow: %v", err)
	}
	var out string
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("workflow result: %v", err)
	}
	if out != "echo: hello" {
		t.Fatalf("workflow result = %q, want %q", out, "echo: hello")
	}
	waitVisible(t, c, s.Namespace(), "AgentryTaskID = 42 AND AgentryAgentID = 'researcher'", testWorkflowID)
	// A column whose index the server dropped is still queried (by a scan).
	waitVisible(t, c, s.Namespace(), "HistoryLength > 0 AND ExecutionStatus = 'Completed'", testWorkflowID)
	w.Stop()
	c.Close()
	stopServer(t, s)
	checkVisibilityIndexes(t, filepath.Join(o.DataDir, databaseFile))

	// Same directory, new ports; an extra search attribute and a longer
	// retention exercise the reconciliation of an existing namespace.
	o.SearchAttributes = DefaultSearchAttributes()
	o.SearchAttributes[extraAttribute] = enums.INDEXED_VALUE_TYPE_KEYWORD
	o.Retention = 96 * time.Hour
	o.UIEnabled = false
	s = startServer(t, o)
	if s.UIAddress() != "" {
		t.Errorf("UIAddress() = %q with the UI disabled, want empty", s.UIAddress())
	}
	c = dial(t, s)
	defer c.Close()

	desc, err := c.DescribeWorkflowExecution(ctx, testWorkflowID, run.GetRunID())
	if err != nil {
		t.Fatalf("describe %s after restart: %v", testWorkflowID, err)
	}
	if st := desc.GetWorkflowExecutionInfo().GetStatus(); st != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Errorf("status after restart = %s, want COMPLETED", st)
	}
	if err := c.GetWorkflow(ctx, testWorkflowID, run.GetRunID()).Get(ctx, &out); err != nil || out != "echo: hello" {
		t.Errorf("result after restart = %q, %v; want %q", out, err, "echo: hello")
	}
	waitVisible(t, c, s.Namespace(), "AgentryTrigger = 'test'", testWorkflowID)
	checkSearchAttributes(t, c, s.Namespace(), o.SearchAttributes)

	ns, err := c.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: s.Namespace()})
	if err != nil {
		t.Fatalf("DescribeNamespace: %v", err)
	}
	if got := ns.GetConfig().GetWorkflowExecutionRetentionTtl().AsDuration(); got != 96*time.Hour {
		t.Errorf("retention after restart = %s, want 96h", got)
	}
	c.Close()
	stopServer(t, s)
}

// checkVisibilityIndexes checks that the database of a stopped server has
// the visibility indexes the gateway needs and none of the trimmed ones.
func checkVisibilityIndexes(t *testing.T, dbPath string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+dbPath+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility'")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		have[name] = true
	}
	for _, name := range unusedVisibilityIndexes(DefaultSearchAttributes()) {
		if have[name] {
			t.Errorf("visibility index %s was not dropped", name)
		}
	}
	for _, name := range []string{"default_idx", "by_workflow_id", "by_status", "by_int_01", "by_keyword_10", "by_temporal_namespace_division"} {
		if !have[name] {
			t.Errorf("visibility index %s is missing", name)
		}
	}
	if len(have) == 0 || have["by_bool_01"] || have["by_temporal_keyword_01"] {
		t.Errorf("visibility indexes after start: %v", slices.Sorted(maps.Keys(have)))
	}
}

func checkUI(t *testing.T, addr string) {
	t.Helper()
	if addr == "" {
		t.Fatal("UIAddress() is empty with the UI enabled")
	}
	for _, path := range []string{"/", "/healthz", "/namespaces/default/workflows", "/api/v1/namespaces"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: status %d, want 200", path, resp.StatusCode)
		}
		if path == "/" && !strings.Contains(strings.ToLower(string(body)), "<html") {
			t.Errorf("GET /: body is not the UI page: %.200s", body)
		}
		// The UI's API proxies to the frontend: proof the two are wired.
		if path == "/api/v1/namespaces" && !strings.Contains(string(body), `"default"`) {
			t.Errorf("GET %s: namespace default not listed: %.300s", path, body)
		}
	}
}

func checkSearchAttributes(t *testing.T, c client.Client, namespace string, want map[string]enums.IndexedValueType) {
	t.Helper()
	resp, err := c.OperatorService().ListSearchAttributes(context.Background(),
		&operatorservice.ListSearchAttributesRequest{Namespace: namespace})
	if err != nil {
		t.Fatalf("ListSearchAttributes: %v", err)
	}
	for name, typ := range want {
		if got, ok := resp.GetCustomAttributes()[name]; !ok || got != typ {
			t.Errorf("search attribute %s = %s (present %v), want %s", name, got, ok, typ)
		}
	}
}

// waitVisible polls visibility, which is updated asynchronously, until query
// finds workflowID.
func waitVisible(t *testing.T, c client.Client, namespace, query, workflowID string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: namespace, Query: query,
		})
		if err != nil {
			t.Fatalf("ListWorkflow %q: %v", query, err)
		}
		for _, e := range resp.GetExecutions() {
			if e.GetExecution().GetWorkflowId() == workflowID {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow %s not listed by %q", workflowID, query)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestBusyPortIsAClearError(t *testing.T) {
	tests := []struct {
		name, key, env string
		set            func(*Options, int)
	}{
		{"frontend", FrontendPortKey, "AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT", func(o *Options, p int) { o.FrontendPort = p }},
		{"ui", UIPortKey, "AGENTRY_TEMPORAL_EMBEDDED_UI_PORT", func(o *Options, p int) { o.UIEnabled, o.UIPort = true, p }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			busy, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer busy.Close()
			port := busy.Addr().(*net.TCPAddr).Port

			o := testOptions(t)
			tt.set(&o, port)
			s, err := Start(context.Background(), o)
			if err == nil {
				_ = s.Stop()
				t.Fatal("Start succeeded on a busy port")
			}
			var pe *PortInUseError
			if !errors.As(err, &pe) {
				t.Fatalf("error = %v (%T), want *PortInUseError", err, err)
			}
			addr := "127.0.0.1:" + strconv.Itoa(port)
			if pe.Addr != addr || pe.ConfigKey != tt.key {
				t.Errorf("PortInUseError = %+v, want Addr %s ConfigKey %s", pe, addr, tt.key)
			}
			msg := err.Error()
			for _, want := range []string{addr, tt.key, tt.env, "already in use"} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not mention %q", msg, want)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
		})
	}
}

func TestPortInUseErrorText(t *testing.T) {
	err := &PortInUseError{Addr: "127.0.0.1:7233", ConfigKey: FrontendPortKey}
	want := "temporal frontend address 127.0.0.1:7233 is already in use; set temporal.embedded.frontend_port (AGENTRY_TEMPORAL_EMBEDDED_FRONTEND_PORT) to a free port"
	if err.Error() != want {
		t.Errorf("Error() =\n%s\nwant\n%s", err.Error(), want)
	}
}

func TestBadOptionsAreRejectedBeforeStart(t *testing.T) {
	tests := []struct {
		name, wantErr string
		change        func(*Options)
	}{
		{"unknown dynamic config key", "frontend.noSuchSetting", func(o *Options) { o.DynamicConfig = map[string]any{"frontend.noSuchSetting": 1} }},
		{"dynamic config of the wrong type", "frontend.rps", func(o *Options) { o.DynamicConfig = map[string]any{"frontend.rps": "lots"} }},
		{"no data directory", "data directory", func(o *Options) { o.DataDir = "" }},
		{"host name instead of IP", "not an IP", func(o *Options) { o.Host = "localhost" }},
		{"short retention", "retention", func(o *Options) { o.Retention = time.Hour }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			tt.change(&o)
			s, err := Start(context.Background(), o)
			if err == nil {
				_ = s.Stop()
				t.Fatal("Start succeeded")
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("error %q does not mention %q", err, tt.wantErr)
			}
		})
	}
}

func TestDefaultDynamicConfigIsValid(t *testing.T) {
	o, err := LoadDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dynamicConfigClient(o.DynamicConfig); err != nil {
		t.Fatalf("temporal.yaml dynamic_config: %v", err)
	}
	if o.FrontendPort != 7233 || o.UIPort != 8233 || !o.UIEnabled || o.Namespace != "default" {
		t.Errorf("LoadDefaults() = %+v, want ports 7233/8233, UI on, namespace default", o)
	}
}

// TestServersSideBySide starts two servers at once, as parallel test packages
// do, and shows that one data directory cannot serve two servers.
func TestServersSideBySide(t *testing.T) {
	opts := []Options{testOptions(t), testOptions(t)}
	servers := make([]*Server, len(opts))
	errs := make(chan error, len(opts))
	for i := range opts {
		go func() {
			s, err := Start(context.Background(), opts[i])
			servers[i] = s
			errs <- err
		}()
	}
	for range opts {
		if err := <-errs; err != nil {
			t.Fatalf("Start: %v", err)
		}
	}
	for _, s := range servers {
		t.Cleanup(func() { _ = s.Stop() })
	}
	if servers[0].FrontendAddress() == servers[1].FrontendAddress() {
		t.Fatalf("both servers on %s", servers[0].FrontendAddress())
	}
	for _, s := range servers {
		c := dial(t, s)
		if _, err := c.CheckHealth(context.Background(), &client.CheckHealthRequest{}); err != nil {
			t.Errorf("health of %s: %v", s.FrontendAddress(), err)
		}
		c.Close()
	}

	_, err := Start(context.Background(), opts[0])
	if err == nil || !strings.Contains(err.Error(), "in use by another embedded Temporal server") {
		t.Errorf("second server on one data directory: error = %v, want it refused", err)
	}
	for _, s := range servers {
		stopServer(t, s)
	}
}

// A frontend port taken between our check and Temporal's bind surfaces as a
// fatal log inside the server; it must still become a *PortInUseError.
func TestFatalListenerLogBecomesPortInUseError(t *testing.T) {
	const addr = "127.0.0.1:7233"
	logger := newTemporalLogger(quietLogger(slog.Default(), slog.LevelError+1))
	err := recoverFatal(func() error {
		logger.Fatal("Failed to start gRPC listener", tag.Address(addr))
		return nil
	}, addr)
	var pe *PortInUseError
	if !errors.As(err, &pe) || pe.ConfigKey != FrontendPortKey {
		t.Fatalf("error = %v, want *PortInUseError for %s", err, FrontendPortKey)
	}

	err = recoverFatal(func() error {
		logger.Fatal("something else broke", tag.Address("127.0.0.1:1"))
		return nil
	}, addr)
	if err == nil || !strings.Contains(err.Error(), "something else broke") {
		t.Fatalf("error = %v, want the fatal message", err)
	}
}

// The same race for real: Temporal itself finds the frontend port taken.
func TestFrontendBindFailureInsideTemporal(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dbPath := filepath.Join(t.TempDir(), databaseFile)
	if _, err := ensureSchema(dbPath); err != nil {
		t.Fatal(err)
	}
	ports, err := reservePorts("127.0.0.1", 4)
	if err != nil {
		t.Fatal(err)
	}
	p := servicePorts{frontend: busy.Addr().(*net.TCPAddr).Port, frontendHTTP: ports[0], history: ports[1], matching: ports[2], worker: ports[3]}
	dyn, _ := dynamicConfigClient(nil)
	logger := quietLogger(slog.Default(), slog.LevelError+1)
	srv, err := startTemporal(context.Background(), "127.0.0.1", p, storage{main: sqliteConfig(dbPath), shards: sqliteHistoryShards}, dyn, logger)
	if err == nil {
		_ = srv.Stop()
		t.Fatal("server started on a busy frontend port")
	}
	if _, ok := err.(*PortInUseError); !ok {
		t.Fatalf("error = %v (%T), want a bare *PortInUseError", err, err)
	}
}

// A port picked for the server that another process takes before Temporal
// binds it (many gateways starting on one machine) is retried with new
// ports: the start succeeds instead of failing on a race it cannot see.
func TestAPickedPortTakenMeanwhileIsPickedAgain(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().(*net.TCPAddr).Port
	calls := 0
	pickPorts = func(host string, n int) ([]int, error) {
		calls++
		ports, err := reservePorts(host, n)
		if calls == 1 && err == nil {
			ports[0] = taken // the frontend's HTTP API port, taken meanwhile
		}
		return ports, err
	}
	t.Cleanup(func() { pickPorts = reservePorts })
	s := startServer(t, testOptions(t))
	if calls != 2 || s.FrontendAddress() == "" {
		t.Fatalf("ports picked %d times, want 2 (one collision, one retry)", calls)
	}
}
