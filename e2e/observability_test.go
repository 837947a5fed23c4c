package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

// The in-memory span exporter of this test binary. Tracing uses the
// OpenTelemetry global provider, so it is installed once, before the
// gateways of the observability tests dial Temporal.
var (
	spansOnce sync.Once
	spans     *tracetest.InMemoryExporter
)

func inMemorySpans() *tracetest.InMemoryExporter {
	spansOnce.Do(func() {
		spans = tracetest.NewInMemoryExporter()
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans)))
	})
	return spans
}

// secretPrompt must never appear in a span: prompts are not recorded
// without telemetry.capture_content.
const secretPrompt = "Quarterly report SECRET-PROMPT-4711"

// TestTraceLinksAPIWorkflowActivityAndProvider: one task run is one trace,
// from the HTTP request through the TaskRun workflow and its LLM activity
// to the provider's HTTP call, with the GenAI attributes and no prompt.
func TestTraceLinksAPIWorkflowActivityAndProvider(t *testing.T) {
	exp := inMemorySpans()
	g := wbStart(t, "runtime: {audit_log: {enabled: true}}\n")
	g.Fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "The report is written."},
		fakellm.Rule{Contains: "SECRET-PROMPT", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "out/report.md", "content": "# Q3\n"})}},
	)
	id := wbCreateTask(t, g, map[string]any{"title": secretPrompt, "agent_id": "writer"})
	r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, r, 202, "start run")
	traceID := r.Header.Get("X-Trace-ID")
	if len(traceID) != 32 {
		t.Fatalf("X-Trace-ID %q", traceID)
	}
	run := wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "finished", "failed")
	if run["status"] != "finished" {
		t.Fatalf("run %v", run)
	}

	// Spans end asynchronously (the workflow span after the run record is
	// final): wait for the second LLM call's provider span.
	var trace []sdktrace.ReadOnlySpan
	deadline := time.Now().Add(30 * time.Second)
	for {
		trace = trace[:0]
		for _, s := range exp.GetSpans().Snapshots() {
			if s.SpanContext().TraceID().String() == traceID {
				trace = append(trace, s)
			}
		}
		if count(trace, func(s sdktrace.ReadOnlySpan) bool { return strings.HasPrefix(s.Name(), "chat ") }) >= 2 &&
			find(trace, "RunWorkflow:TaskRun") != nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range trace {
		byID[s.SpanContext().SpanID().String()] = s
	}
	// ancestors lists the names from s up to the root.
	ancestors := func(s sdktrace.ReadOnlySpan) []string {
		var names []string
		for s != nil {
			names = append(names, s.Name())
			s = byID[s.Parent().SpanID().String()]
		}
		return names
	}
	var providerSpan sdktrace.ReadOnlySpan
	for _, s := range trace {
		if p := byID[s.Parent().SpanID().String()]; p != nil && strings.HasPrefix(p.Name(), "chat ") && strings.HasPrefix(s.Name(), "HTTP POST") {
			providerSpan = s
		}
	}
	if providerSpan == nil {
		t.Fatalf("no provider HTTP span under an LLM span in trace %s: %v", traceID, names(trace))
	}
	chain := strings.Join(ancestors(providerSpan), " <- ")
	for _, want := range []string{"chat llama3.2", "RunActivity:", "RunWorkflow:TaskRun", "StartWorkflow:TaskRun", "POST /api/v1/workboard/tasks/:id/run"} {
		if !strings.Contains(chain, want) {
			t.Fatalf("provider span's ancestry lacks %q: %s", want, chain)
		}
	}
	llmSpan := byID[providerSpan.Parent().SpanID().String()]
	attrs := map[string]string{}
	for _, a := range llmSpan.Attributes() {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	for k, want := range map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "ollama", "gen_ai.request.model": "llama3.2",
		"agentry.llm.provider_id": "ollama"} {
		if attrs[k] != want {
			t.Errorf("LLM span %s = %q, want %q (all: %v)", k, attrs[k], want, attrs)
		}
	}
	for _, k := range []string{"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "agentry.llm.cost_micros", "agentry.llm.call_id"} {
		if attrs[k] == "" || attrs[k] == "0" && k != "agentry.llm.cost_micros" {
			t.Errorf("LLM span lacks %s: %v", k, attrs)
		}
	}
	for _, want := range []string{"cost admission", "execute_tool write_file"} {
		if find(trace, want) == nil {
			t.Errorf("no %q span in the trace: %v", want, names(trace))
		}
	}
	// No prompt text in any attribute or event of any span of any trace.
	for _, s := range exp.GetSpans().Snapshots() {
		for _, a := range s.Attributes() {
			if strings.Contains(a.Value.Emit(), "SECRET-PROMPT") {
				t.Fatalf("span %s attribute %s carries prompt text", s.Name(), a.Key)
			}
		}
	}

	// The audit log has the two mutating calls with the trace id of the run request.
	lines := auditLines(t, g)
	var sawRun bool
	for _, l := range lines {
		if l["route"] == "/api/v1/workboard/tasks/:id/run" {
			sawRun = true
			if l["trace_id"] != traceID || l["outcome"] != "ok" || l["subject"] == nil || l["targets"].(map[string]any)["id"] != fmt.Sprint(id) {
				t.Errorf("audit line %v", l)
			}
		}
	}
	if !sawRun {
		t.Errorf("no audit line for the run request: %v", lines)
	}
	raw, _ := os.ReadFile(filepath.Join(g.Workspace, "logs", "audit.log"))
	if strings.Contains(string(raw), "SECRET-PROMPT") || strings.Contains(string(raw), gatewaytest.TestAPIKey) {
		t.Fatalf("audit log carries a body or a secret: %s", raw)
	}
}

// TestErrorEnvelopeAndAuditCarryTraceID: an error answer names its trace,
// a caller's traceparent is continued, refusals are audited as decisions.
func TestErrorEnvelopeAndAuditCarryTraceID(t *testing.T) {
	inMemorySpans()
	g := startChatGateway(t, "runtime: {audit_log: {enabled: true}}\n")
	req, _ := http.NewRequest("POST", g.URL()+"/api/v1/chat", strings.NewReader(`{"agent_id": "nobody", "text": "hi"}`))
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != 404 || body["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" || resp.Header.Get("X-Trace-ID") != body["trace_id"] {
		t.Fatalf("status %d, body %v, X-Trace-ID %q", resp.StatusCode, body, resp.Header.Get("X-Trace-ID"))
	}
	r := g.DoAs(viewerKey, "POST", "/api/v1/agents/helper/reload", nil)
	if r.Status != 403 && r.Status != 404 {
		t.Fatalf("viewer write: %d %s", r.Status, r.Raw)
	}
	if r := g.DoAs("wrong-key", "DELETE", "/api/v1/workboard/tasks/1", nil); r.Status != 401 || r.JSON["trace_id"] == nil {
		t.Fatalf("unauthenticated: %d %s", r.Status, r.Raw)
	}
	var denied, notFound bool
	for _, l := range auditLines(t, g) {
		if l["kind"] == "decision" && l["outcome"] == "denied" && l["status"] == float64(401) && l["route"] == "/api/v1" {
			denied = true
		}
		if l["route"] == "/api/v1/chat" && l["outcome"] == "error" && l["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736" {
			notFound = true
		}
	}
	if !denied || !notFound {
		t.Fatalf("audit lines (denied %v, chat error %v): %v", denied, notFound, auditLines(t, g))
	}
	// The CLI's source: GET /logs/audit (admin only).
	if r := g.DoAs(viewerKey, "GET", "/api/v1/logs/audit", nil); r.Status != 403 {
		t.Fatalf("viewer reads the audit log: %d", r.Status)
	}
}

func auditLines(t *testing.T, g *gatewaytest.Gateway) []map[string]any {
	t.Helper()
	r := g.Do("GET", "/api/v1/logs/audit?lines=1000", nil)
	if r.Status != 200 {
		t.Fatalf("GET /logs/audit: %d %s", r.Status, r.Raw)
	}
	var out []map[string]any
	for _, l := range r.JSON["lines"].([]any) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l.(string)), &m); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// TestMetricsMoveWithChatAndTaskRun scrapes /metrics before and after a
// chat and a task run and checks the counters moved by what happened.
func TestMetricsMoveWithChatAndTaskRun(t *testing.T) {
	g := wbStart(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "metrics run", Reply: "done"})
	if r := g.DoAs("", "GET", "/metrics", nil); r.Status != 401 {
		t.Fatalf("/metrics without the key: %d", r.Status)
	}
	before := scrape(t, g)
	start := time.Now().Add(-time.Second)

	r := g.Do("POST", "/api/v1/chat", map[string]any{"agent_id": "talker", "text": "metrics chat"})
	if r.Status != 200 {
		t.Fatalf("chat: %d %s", r.Status, r.Raw)
	}
	id := wbCreateTask(t, g, map[string]any{"title": "metrics run", "agent_id": "talker"})
	r = g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, r, 202, "start run")
	if run := wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "finished", "failed"); run["status"] != "finished" {
		t.Fatalf("run %v", run)
	}
	// Ledger truth for the token and cost counters.
	calls, err := g.Services().Costs.Calls(context.Background(), models.LedgerFilter{From: start, AgentID: "talker"}, 100)
	if err != nil || len(calls) != 2 {
		t.Fatalf("ledger calls %d, err %v", len(calls), err)
	}
	var in, out, cost int64
	for _, c := range calls {
		in, out, cost = in+c.InputTokens, out+c.OutputTokens, cost+c.CostMicros
	}
	// Runs are counted from the event stream: wait until it has been read.
	var after map[string]float64
	deadline := time.Now().Add(20 * time.Second)
	for {
		after = scrape(t, g)
		if delta(before, after, `agentry_runs_total{status="finished"}`) >= 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	for key, want := range map[string]float64{
		`agentry_llm_calls_total{model="llama3.2",outcome="ok",provider="ollama"}`:                        2,
		`agentry_llm_tokens_total{model="llama3.2",provider="ollama",type="input"}`:                       float64(in),
		`agentry_llm_tokens_total{model="llama3.2",provider="ollama",type="output"}`:                      float64(out),
		`agentry_llm_cost_usd_total{model="llama3.2",provider="ollama"}`:                                  float64(cost) / 1e6,
		`agentry_http_requests_total{method="POST",route="/api/v1/chat",status="200"}`:                    1,
		`agentry_http_requests_total{method="POST",route="/api/v1/workboard/tasks/:id/run",status="202"}`: 1,
		`agentry_runs_total{status="started"}`:                                                            1,
		`agentry_runs_total{status="finished"}`:                                                           1,
	} {
		if got := delta(before, after, key); got != want {
			t.Errorf("%s moved by %v, want %v", key, got, want)
		}
	}
	if in == 0 || out == 0 {
		t.Errorf("ledger has no tokens: %d/%d", in, out)
	}
	if _, ok := after["agentry_runs_active"]; !ok {
		t.Errorf("no agentry_runs_active gauge")
	}
	var temporal int
	for k := range after {
		if strings.HasPrefix(k, "temporal_") {
			temporal++
		}
	}
	if temporal == 0 {
		t.Errorf("no Temporal SDK metrics on /metrics")
	}
}

// scrape reads /metrics into "name{label="value",...}" -> value (labels
// sorted by name; histograms as name_count and name_sum).
func scrape(t *testing.T, g *gatewaytest.Gateway) map[string]float64 {
	t.Helper()
	req, _ := http.NewRequest("GET", g.URL()+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+gatewaytest.TestAPIKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	return parseMetrics(t, resp.Body)
}

func parseMetrics(t *testing.T, r io.Reader) map[string]float64 {
	t.Helper()
	var p expfmt.TextParser
	families, err := p.TextToMetricFamilies(bufio.NewReader(r))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			key := name + labelString(m.GetLabel())
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[name+"_count"+labelString(m.GetLabel())] = float64(m.GetHistogram().GetSampleCount())
				out[name+"_sum"+labelString(m.GetLabel())] = m.GetHistogram().GetSampleSum()
			case m.Untyped != nil:
				out[key] = m.GetUntyped().GetValue()
			}
		}
	}
	return out
}

func labelString(ls []*dto.LabelPair) string {
	if len(ls) == 0 {
		return ""
	}
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func delta(before, after map[string]float64, key string) float64 {
	d := after[key] - before[key]
	if d < 1e-9 && d > -1e-9 {
		return 0
	}
	return float64(int64(d*1e6+0.5)) / 1e6
}

func find(spans []sdktrace.ReadOnlySpan, prefix string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), prefix) {
			return s
		}
	}
	return nil
}

func count(spans []sdktrace.ReadOnlySpan, ok func(sdktrace.ReadOnlySpan) bool) int {
	n := 0
	for _, s := range spans {
		if ok(s) {
			n++
		}
	}
	return n
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}
