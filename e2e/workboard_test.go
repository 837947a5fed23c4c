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
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/converter"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/models"
)

const wb = "/api/v1/workboard"

const wbViewerKey = "wb-viewer-key-0123456789"

// wbAgents: writer may write files; talker has no tools.
var wbAgents = map[string]string{
	"writer.yaml": "id: writer\ndescription: writes files\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\nsystem_prompt: You write files.\n",
	"talker.yaml": "id: talker\nllm: {provider: ollama, model: llama3.2}\nmax_turns: 2\n",
	"off.yaml":    "id: off\nenabled: false\nllm: {provider: ollama, model: llama3.2}\n",
}

// wbStart starts a gateway with the workboard agents. Runs still active
// when the test ends are terminated, so the shared Temporal server holds
// no task-<id> workflow that a later test's task could collide with.
func wbStart(t *testing.T, extra string) *gatewaytest.Gateway {
	t.Helper()
	return wbStartWith(t, extra, false)
}

// wbStartWith is wbStart, storing the application data in PostgreSQL when
// postgres is set.
func wbStartWith(t *testing.T, extra string, postgres bool) *gatewaytest.Gateway {
	t.Helper()
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: wbAgents, Postgres: postgres, Config: `
auth:
  keys:
    - {subject: vera, key: ` + wbViewerKey + `, role: viewer}
` + extra})
	t.Cleanup(func() {
		var runs []models.TaskRun
		g.Store.DB.Where("active_task_id IS NOT NULL").Find(&runs)
		for _, r := range runs {
			g.Temporal.TerminateWorkflow(context.Background(), r.WorkflowID, "", "test cleanup")
		}
	})
	return g
}

func wbWantStatus(t *testing.T, r gatewaytest.Response, status int, what string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("%s: status %d, want %d: %s", what, r.Status, status, r.Raw)
	}
}

func wbID(t *testing.T, r gatewaytest.Response) int64 {
	t.Helper()
	id, ok := r.JSON["id"].(float64)
	if !ok {
		t.Fatalf("no id in %s", r.Raw)
	}
	return int64(id)
}

func wbCreateTask(t *testing.T, g *gatewaytest.Gateway, body map[string]any) int64 {
	t.Helper()
	r := g.Do("POST", wb+"/tasks", body)
	wbWantStatus(t, r, 201, "create task")
	return wbID(t, r)
}

// wbWaitRun polls a run until it is in one of the wanted statuses.
func wbWaitRun(t *testing.T, g *gatewaytest.Gateway, taskID, runID int64, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last gatewaytest.Response
	for time.Now().Before(deadline) {
		last = g.Do("GET", fmt.Sprintf("%s/tasks/%d/runs/%d", wb, taskID, runID), nil)
		if last.Status == 200 {
			for _, w := range want {
				if last.JSON["status"] == w {
					return last.JSON
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %d not %v within %s: %d %s", runID, want, timeout, last.Status, last.Raw)
	return nil
}

func wbTaskStatus(t *testing.T, g *gatewaytest.Gateway, id int64) string {
	t.Helper()
	r := g.Do("GET", fmt.Sprintf("%s/tasks/%d", wb, id), nil)
	wbWantStatus(t, r, 200, "get task")
	return r.JSON["status"].(string)
}

// wbFrame is one event of GET /events.
type wbFrame struct {
	ID    int64
	Type  string
	Event models.Event
}

// wbSubscribe opens GET /events with query q (and Last-Event-ID when
// lastID is not empty) and delivers its frames until the test ends.
func wbSubscribe(t *testing.T, g *gatewaytest.Gateway, q, lastID string) <-chan wbFrame {
	t.Helper()
	return wbSubscribeAt(t, g.URL(), gatewaytest.TestAPIKey, q, lastID)
}

// wbSubscribeAt is wbSubscribe for a gateway at base with an API key.
func wbSubscribeAt(t *testing.T, base, key, q, lastID string) <-chan wbFrame {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", base+"/api/v1/events?"+q, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("events: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	out := make(chan wbFrame, 256)
	go func() {
		defer resp.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var f wbFrame
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				f.ID, _ = strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			case strings.HasPrefix(line, "event: "):
				f.Type = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &f.Event)
			case line == "" && f.Type != "":
				out <- f
				f = wbFrame{}
			}
		}
	}()
	return out
}

// wbCollect reads frames until one of type until arrives (included).
func wbCollect(t *testing.T, ch <-chan wbFrame, until string, timeout time.Duration) []wbFrame {
	t.Helper()
	var got []wbFrame
	deadline := time.After(timeout)
	for {
		select {
		case f, ok := <-ch:
			if !ok {
				t.Fatalf("event stream ended; got %v", wbTypes(got))
			}
			got = append(got, f)
			if f.Type == until {
				return got
			}
		case <-deadline:
			t.Fatalf("no %s event within %s; got %v", until, timeout, wbTypes(got))
		}
	}
}

func wbTypes(fs []wbFrame) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Type)
	}
	return out
}

// wbWithoutTurns drops run.turn frames, for tests about other steps
// (TestWorkboardRunProducesArtifactsAndEvents checks the turns).
func wbWithoutTurns(fs []wbFrame) []wbFrame {
	var out []wbFrame
	for _, f := range fs {
		if f.Type != "run.turn" {
			out = append(out, f)
		}
	}
	return out
}

func TestWorkboardTaskRoutes(t *testing.T) {
	g := wbStart(t, "")

	r := g.Do("POST", wb+"/tasks", map[string]any{"title": "  Write the report ", "description": "Q3", "agent_id": "writer",
		"priority": "high", "tags": []string{"finance", "q3"}, "due_at": "2026-05-01T09:00:00+02:00", "owner": "ana"})
	wbWantStatus(t, r, 201, "create")
	id := wbID(t, r)
	if r.JSON["title"] != "Write the report" || r.JSON["status"] != "todo" || r.JSON["priority"] != "high" ||
		r.JSON["due_at"] != "2026-05-01T07:00:00Z" || r.Header.Get("Location") != fmt.Sprintf("%s/tasks/%d", wb, id) {
		t.Fatalf("created %s (Location %q)", r.Raw, r.Header.Get("Location"))
	}
	if tags := r.JSON["tags"].([]any); len(tags) != 2 {
		t.Fatalf("tags %v", tags)
	}
	minimal := g.Do("POST", wb+"/tasks", map[string]any{"title": "Minimal"})
	wbWantStatus(t, minimal, 201, "create minimal")
	if minimal.JSON["priority"] != "normal" || minimal.JSON["due_at"] != nil || len(minimal.JSON["tags"].([]any)) != 0 {
		t.Fatalf("defaults %s", minimal.Raw)
	}

	// Bad input: 400 naming the field, nothing created.
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{}, "title"},
		{map[string]any{"title": ""}, "title"},
		{map[string]any{"title": strings.Repeat(" ", 10<<10)}, "title"},
		{map[string]any{"title": 5}, "title"},
		{map[string]any{"title": "x", "status": "doing"}, "status"},
		{map[string]any{"title": "x", "tags": "a,b"}, "tags"},
		{map[string]any{"title": "x", "tags": []any{"a", 1}}, "tags"},
		{map[string]any{"title": "x", "due_at": "next friday"}, "due_at"},
		{map[string]any{"title": "x", "priority": "p0"}, "priority"},
		{"not json", ""},
		{"[]", ""},
	} {
		r := g.Do("POST", wb+"/tasks", c.body)
		if r.Status != 400 || r.JSON["error"] == nil || (c.field != "" && r.JSON["field"] != c.field) {
			t.Errorf("create %v: %d %s, want 400 on %q", c.body, r.Status, r.Raw, c.field)
		}
	}
	list := g.Do("GET", wb+"/tasks", nil)
	wbWantStatus(t, list, 200, "list")
	if n := len(list.JSON["tasks"].([]any)); n != 2 {
		t.Fatalf("refused creates left tasks: %d", n)
	}
	if fmt.Sprint(list.JSON["statuses"]) != "[todo running needs_review done failed]" {
		t.Fatalf("statuses %v", list.JSON["statuses"])
	}

	path := fmt.Sprintf("%s/tasks/%d", wb, id)
	wbWantStatus(t, g.Do("GET", path, nil), 200, "get")
	wbWantStatus(t, g.Do("GET", wb+"/tasks/99999", nil), 404, "get unknown")
	wbWantStatus(t, g.Do("GET", wb+"/tasks/abc", nil), 400, "get non-integer")
	wbWantStatus(t, g.Do("GET", wb+"/tasks/1.5", nil), 400, "get non-integer")

	// PATCH changes only what it names; "" clears due_at.
	p := g.Do("PATCH", path, map[string]any{"owner": "bo", "due_at": ""})
	wbWantStatus(t, p, 200, "patch")
	if p.JSON["owner"] != "bo" || p.JSON["due_at"] != nil || p.JSON["title"] != "Write the report" || p.JSON["priority"] != "high" ||
		p.JSON["description"] != "Q3" || len(p.JSON["tags"].([]any)) != 2 {
		t.Fatalf("patched %s", p.Raw)
	}
	before := g.Do("GET", path, nil).Raw
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{"due_at": "31/12/2026"}, "due_at"},
		{map[string]any{"status": "archived"}, "status"},
		{map[string]any{"tags": map[string]any{"a": 1}}, "tags"},
		{map[string]any{"title": "   "}, "title"},
		{map[string]any{"title": nil}, "title"},
		{map[string]any{"owner": "x", "status": "nope"}, "status"},
		{map[string]any{}, ""},
		// Not UTF-8: encoding/json would store U+FFFD in its place.
		{"{\"title\":\"a\xff\xfeb\"}", ""},
	} {
		r := g.Do("PATCH", path, c.body)
		if r.Status != 400 || (c.field != "" && r.JSON["field"] != c.field) {
			t.Errorf("patch %v: %d %s, want 400 on %q", c.body, r.Status, r.Raw, c.field)
		}
	}
	if after := g.Do("GET", path, nil).Raw; string(after) != string(before) {
		t.Fatalf("refused patches changed the task:\n%s\n%s", before, after)
	}
	wbWantStatus(t, g.Do("PATCH", wb+"/tasks/99999", map[string]any{"owner": "x"}), 404, "patch unknown")
	wbWantStatus(t, g.Do("PATCH", wb+"/tasks/x", map[string]any{"owner": "x"}), 400, "patch non-integer")
	st := g.Do("PATCH", path, map[string]any{"status": "done", "tags": nil})
	if st.Status != 200 || st.JSON["status"] != "done" || len(st.JSON["tags"].([]any)) != 0 {
		t.Fatalf("patch status: %s", st.Raw)
	}

	// Filters and pages.
	for i := range 5 {
		wbCreateTask(t, g, map[string]any{"title": fmt.Sprintf("t%d", i), "agent_id": "talker"})
	}
	talker := g.Do("GET", wb+"/tasks?agent_id=talker&status=todo", nil)
	if n := len(talker.JSON["tasks"].([]any)); n != 5 {
		t.Fatalf("agent filter: %d", n)
	}
	done := g.Do("GET", wb+"/tasks?status=done", nil)
	if ts := done.JSON["tasks"].([]any); len(ts) != 1 || int64(ts[0].(map[string]any)["id"].(float64)) != id {
		t.Fatalf("status filter: %s", done.Raw)
	}
	wbWantStatus(t, g.Do("GET", wb+"/tasks?status=nope", nil), 400, "bad status filter")
	var seen []float64
	q := wb + "/tasks?limit=3"
	for range 5 {
		pg := g.Do("GET", q, nil)
		wbWantStatus(t, pg, 200, "page")
		for _, tk := range pg.JSON["tasks"].([]any) {
			seen = append(seen, tk.(map[string]any)["id"].(float64))
		}
		next, ok := pg.JSON["next_cursor"].(string)
		if !ok {
			break
		}
		q = wb + "/tasks?limit=3&cursor=" + next
	}
	if len(seen) != 7 {
		t.Fatalf("pages returned %d tasks: %v", len(seen), seen)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Fatalf("pages out of order: %v", seen)
		}
	}
	wbWantStatus(t, g.Do("GET", wb+"/tasks?limit=0", nil), 400, "limit 0")
	wbWantStatus(t, g.Do("GET", wb+"/tasks?cursor=abc", nil), 400, "bad cursor")

	// Comments.
	cpath := path + "/comments"
	c1 := g.Do("POST", cpath, map[string]any{"body": "Looks fine", "author": "ana"})
	wbWantStatus(t, c1, 201, "comment")
	if c1.JSON["kind"] != "note" || c1.JSON["author"] != "ana" || c1.JSON["task_id"] != float64(id) {
		t.Fatalf("comment %s", c1.Raw)
	}
	anon := g.Do("POST", cpath, map[string]any{"body": "who am I"})
	if anon.Status != 201 || anon.JSON["author"] == "" {
		t.Fatalf("comment author defaults to the caller: %s", anon.Raw)
	}
	for _, bad := range []map[string]any{{"body": " "}, {"body": "x", "kind": "shout"}, {"body": 3}, {"body": "x", "decision": "accept"}} {
		if r := g.Do("POST", cpath, bad); r.Status != 400 {
			t.Errorf("comment %v: %d %s", bad, r.Status, r.Raw)
		}
	}
	// A decision needs a task awaiting review.
	r = g.Do("POST", cpath, map[string]any{"body": "ok", "kind": "review", "decision": "accept"})
	if r.Status != 409 || r.JSON["code"] != "not_in_review" {
		t.Fatalf("decision on a done task: %d %s", r.Status, r.Raw)
	}
	cl := g.Do("GET", cpath, nil)
	if cl.Status != 200 || cl.JSON["count"] != float64(2) || len(cl.JSON["comments"].([]any)) != 2 {
		t.Fatalf("comments %s", cl.Raw)
	}
	wbWantStatus(t, g.Do("POST", wb+"/tasks/99999/comments", map[string]any{"body": "x"}), 404, "comment unknown task")
	wbWantStatus(t, g.Do("GET", wb+"/tasks/99999/comments", nil), 404, "comments of unknown task")
	wbWantStatus(t, g.Do("DELETE", fmt.Sprintf("%s/comments/%d", wb, wbID(t, c1)), nil), 204, "delete comment")
	wbWantStatus(t, g.Do("DELETE", fmt.Sprintf("%s/comments/%d", wb, wbID(t, c1)), nil), 404, "delete comment again")
	wbWantStatus(t, g.Do("DELETE", wb+"/comments/zz", nil), 400, "delete comment non-integer")

	// Artifacts and runs of unknown things.
	wbWantStatus(t, g.Do("GET", wb+"/tasks/99999/artifacts", nil), 404, "artifacts of unknown task")
	wbWantStatus(t, g.Do("GET", wb+"/tasks/99999/runs", nil), 404, "runs of unknown task")
	wbWantStatus(t, g.Do("GET", wb+"/artifacts/99999/download", nil), 404, "unknown artifact")
	wbWantStatus(t, g.Do("GET", wb+"/artifacts/x/download", nil), 400, "artifact non-integer")
	arts := g.Do("GET", path+"/artifacts", nil)
	if arts.Status != 200 || arts.JSON["count"] != float64(0) || len(arts.JSON["artifacts"].([]any)) != 0 {
		t.Fatalf("artifacts %s", arts.Raw)
	}

	// Viewers read but do not write.
	if r := g.DoAs(wbViewerKey, "GET", path, nil); r.Status != 200 {
		t.Fatalf("viewer read: %d", r.Status)
	}
	for _, m := range [][2]string{{"POST", wb + "/tasks"}, {"PATCH", path}, {"DELETE", path}, {"POST", path + "/run"}, {"POST", cpath}} {
		if r := g.DoAs(wbViewerKey, m[0], m[1], map[string]any{"title": "x", "body": "x"}); r.Status != 403 {
			t.Errorf("viewer %s %s: %d", m[0], m[1], r.Status)
		}
	}

	// Delete removes the task and its comments.
	wbWantStatus(t, g.Do("DELETE", path, nil), 204, "delete")
	wbWantStatus(t, g.Do("GET", path, nil), 404, "get deleted")
	wbWantStatus(t, g.Do("DELETE", path, nil), 404, "delete again")
	wbWantStatus(t, g.Do("DELETE", fmt.Sprintf("%s/comments/%d", wb, wbID(t, anon)), nil), 404, "comment of deleted task")
	wbWantStatus(t, g.Do("DELETE", wb+"/tasks/abc", nil), 400, "delete non-integer")
}

func TestWorkboardRunProducesArtifactsAndEvents(t *testing.T) {
	g := wbStart(t, "")
	g.Fake.Script(
		fakellm.Rule{Contains: "wrote", Reply: "The report is written."},
		fakellm.Rule{Contains: "Quarterly report", ToolCalls: []fakellm.ToolCall{
			fakellm.NewToolCall("write_file", map[string]string{"path": "out/report.md", "content": "# Q3\n"})}},
	)
	id := wbCreateTask(t, g, map[string]any{"title": "Quarterly report", "agent_id": "writer"})
	path := fmt.Sprintf("%s/tasks/%d", wb, id)
	stream := wbSubscribe(t, g, fmt.Sprintf("task_id=%d&type=run.", id), "")

	r := g.Do("POST", path+"/run", nil)
	wbWantStatus(t, r, 202, "start run")
	runID := wbID(t, r)
	if r.JSON["task_id"] != float64(id) || r.JSON["attempt"] != float64(1) || r.JSON["workflow_id"] != fmt.Sprintf("task-%d", id) ||
		(r.JSON["status"] != "queued" && r.JSON["status"] != "running") || r.JSON["created_at"] == nil {
		t.Fatalf("run record %s", r.Raw)
	}
	run := wbWaitRun(t, g, id, runID, 60*time.Second, "finished", "failed")
	if run["status"] != "finished" || run["turns"] != float64(2) || run["reply"] != "The report is written." ||
		run["input_tokens"].(float64) <= 0 || run["started_at"] == nil || run["finished_at"] == nil || run["duration_ms"] == nil {
		t.Fatalf("finished run %v", run)
	}
	if st := wbTaskStatus(t, g, id); st != "needs_review" {
		t.Fatalf("task status %s", st)
	}

	frames := wbCollect(t, stream, "run.finished", 10*time.Second)
	if fmt.Sprint(wbTypes(frames)) != "[run.started run.turn run.artifact run.turn run.finished]" {
		t.Fatalf("events %v", wbTypes(frames))
	}
	for _, f := range frames {
		if f.Event.TaskID != id || f.Event.RunID != runID || f.Event.Attempt != 1 || f.Event.AgentID != "writer" || f.ID != f.Event.ID {
			t.Fatalf("event %+v", f)
		}
	}
	if p := frames[1].Event.PayloadMap(); p["turn"] != float64(1) || fmt.Sprint(p["tool_calls"]) != "[write_file]" || p["input_tokens"].(float64) <= 0 {
		t.Fatalf("first run.turn payload %v", p)
	}
	if p := frames[2].Event.PayloadMap(); p["name"] != "out/report.md" || p["size_bytes"] != float64(5) || p["tool"] != "write_file" {
		t.Fatalf("run.artifact payload %v", p)
	}
	if p := frames[3].Event.PayloadMap(); p["turn"] != float64(2) || fmt.Sprint(p["tool_calls"]) != "[]" {
		t.Fatalf("second run.turn payload %v", p)
	}
	if p := frames[4].Event.PayloadMap(); p["task_status"] != "needs_review" || p["turns"] != float64(2) {
		t.Fatalf("run.finished payload %v", p)
	}
	// Resume after run.started: the rest again, in order.
	resumed := wbCollect(t, wbSubscribe(t, g, fmt.Sprintf("task_id=%d", id), strconv.FormatInt(frames[0].ID, 10)), "run.finished", 10*time.Second)
	if fmt.Sprint(wbTypes(resumed)) != "[run.turn run.artifact run.turn run.finished]" {
		t.Fatalf("resumed %v", wbTypes(resumed))
	}

	// Operators find the run in Temporal by search attributes and summary.
	desc, err := g.Temporal.DescribeWorkflowExecution(context.Background(), fmt.Sprintf("task-%d", id), "")
	if err != nil {
		t.Fatal(err)
	}
	info := desc.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		t.Fatalf("workflow status %v", info.GetStatus())
	}
	var agentAttr string
	var taskAttr int64
	converter.GetDefaultDataConverter().FromPayload(info.GetSearchAttributes().GetIndexedFields()["AgentryAgentID"], &agentAttr)
	converter.GetDefaultDataConverter().FromPayload(info.GetSearchAttributes().GetIndexedFields()["AgentryTaskID"], &taskAttr)
	var summary string
	converter.GetDefaultDataConverter().FromPayload(desc.GetExecutionConfig().GetUserMetadata().GetSummary(), &summary)
	if agentAttr != "writer" || taskAttr != id || !strings.Contains(summary, "Quarterly report") || !strings.Contains(summary, "writer") {
		t.Fatalf("search attributes agent=%q task=%d summary=%q", agentAttr, taskAttr, summary)
	}

	// The artifact: listed, downloadable, inside the artifact area.
	arts := g.Do("GET", path+"/artifacts", nil)
	if arts.Status != 200 || arts.JSON["count"] != float64(1) {
		t.Fatalf("artifacts %s", arts.Raw)
	}
	art := arts.JSON["artifacts"].([]any)[0].(map[string]any)
	file := art["path"].(string)
	area, _ := filepath.EvalSymlinks(filepath.Join(g.Workspace, "artifacts"))
	if !strings.HasPrefix(file, area+string(filepath.Separator)) || art["size_bytes"] != float64(5) || art["tool"] != "write_file" || art["created_at"] == nil {
		t.Fatalf("artifact %v (area %s)", art, area)
	}
	artID := int64(art["id"].(float64))
	dl := g.Do("GET", fmt.Sprintf("%s/artifacts/%d/download", wb, artID), nil)
	if dl.Status != 200 || string(dl.Raw) != "# Q3\n" || !strings.HasPrefix(dl.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(dl.Header.Get("Content-Disposition"), "report.md") {
		t.Fatalf("download %d %q %q", dl.Status, dl.Header.Get("Content-Disposition"), dl.Raw)
	}
	// A record whose path points outside the area is never served.
	outside := filepath.Join(t.TempDir(), "secret.txt")
	os.WriteFile(outside, []byte("secret"), 0o644)
	g.Store.DB.Model(&models.Artifact{}).Where("id = ?", artID).Update("path", outside)
	if r := g.Do("GET", fmt.Sprintf("%s/artifacts/%d/download", wb, artID), nil); r.Status != 404 || strings.Contains(string(r.Raw), "secret") {
		t.Fatalf("outside path: %d %s", r.Status, r.Raw)
	}
	g.Store.DB.Model(&models.Artifact{}).Where("id = ?", artID).Update("path", file)
	os.Remove(file)
	if r := g.Do("GET", fmt.Sprintf("%s/artifacts/%d/download", wb, artID), nil); r.Status != 410 || r.JSON["error"] == nil {
		t.Fatalf("gone file: %d %s", r.Status, r.Raw)
	}

	// Review: send back (todo), run again (attempt 2), accept (done).
	rev := g.Do("POST", path+"/comments", map[string]any{"author": "rita", "body": "Add sources", "kind": "review", "decision": "reject"})
	if rev.Status != 201 || rev.JSON["task_status"] != "todo" || rev.JSON["decision"] != "reject" {
		t.Fatalf("reject: %s", rev.Raw)
	}
	r2 := g.Do("POST", path+"/run", nil)
	wbWantStatus(t, r2, 202, "second run")
	if r2.JSON["attempt"] != float64(2) {
		t.Fatalf("second attempt %s", r2.Raw)
	}
	wbWaitRun(t, g, id, wbID(t, r2), 60*time.Second, "finished")
	acc := g.Do("POST", path+"/comments", map[string]any{"body": "Good", "kind": "review", "decision": "accept"})
	if acc.Status != 201 || acc.JSON["task_status"] != "done" {
		t.Fatalf("accept: %s", acc.Raw)
	}
	runs := g.Do("GET", path+"/runs", nil)
	rs := runs.JSON["runs"].([]any)
	if runs.Status != 200 || runs.JSON["count"] != float64(2) || len(rs) != 2 ||
		rs[0].(map[string]any)["attempt"] != float64(2) || rs[1].(map[string]any)["attempt"] != float64(1) {
		t.Fatalf("run history %s", runs.Raw)
	}

	// Deleting the task removes its runs, artifact records and files.
	wbWantStatus(t, g.Do("DELETE", path, nil), 204, "delete task")
	wbWantStatus(t, g.Do("GET", fmt.Sprintf("%s/artifacts/%d/download", wb, artID), nil), 404, "artifact of deleted task")
	if _, err := os.Stat(filepath.Join(g.Workspace, "artifacts", strconv.FormatInt(id, 10))); !os.IsNotExist(err) {
		t.Fatalf("artifact folder left: %v", err)
	}
	var n int64
	g.Store.DB.Model(&models.TaskRun{}).Where("task_id = ?", id).Count(&n)
	if n != 0 {
		t.Fatalf("%d runs left", n)
	}
}

func TestWorkboardConcurrentRunsCancelAndDelete(t *testing.T) {
	for _, pg := range []bool{false, true} {
		name := "sqlite"
		if pg {
			name = "postgres"
		}
		t.Run(name, func(t *testing.T) { testConcurrentRunsCancelAndDelete(t, pg) })
	}
}

func testConcurrentRunsCancelAndDelete(t *testing.T, postgres bool) {
	g := wbStartWith(t, "", postgres)
	g.Fake.Script(fakellm.Rule{Contains: "Slow task", Delay: fakellm.Duration(time.Minute)})
	id := wbCreateTask(t, g, map[string]any{"title": "Slow task", "agent_id": "talker"})
	path := fmt.Sprintf("%s/tasks/%d", wb, id)
	events := wbSubscribe(t, g, fmt.Sprintf("task_id=%d", id), "")

	// Two requests at once: exactly one run.
	var wg sync.WaitGroup
	results := make([]gatewaytest.Response, 2)
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = g.Do("POST", path+"/run", nil)
		}()
	}
	close(start)
	wg.Wait()
	codes := map[int]int{}
	var runID int64
	for _, r := range results {
		codes[r.Status]++
		if r.Status == 202 {
			runID = wbID(t, r)
		}
		if r.Status == 409 && (r.JSON["code"] != "run_active" || r.JSON["error"] == nil) {
			t.Fatalf("409 body %s", r.Raw)
		}
	}
	if codes[202] != 1 || codes[409] != 1 {
		t.Fatalf("concurrent run requests: %v (%s / %s)", codes, results[0].Raw, results[1].Raw)
	}
	// The database and Temporal agree: one run, one running workflow.
	runs := g.Do("GET", path+"/runs", nil)
	if runs.JSON["count"] != float64(1) {
		t.Fatalf("runs after race %s", runs.Raw)
	}
	desc, err := g.Temporal.DescribeWorkflowExecution(context.Background(), fmt.Sprintf("task-%d", id), "")
	if err != nil || desc.GetWorkflowExecutionInfo().GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		t.Fatalf("workflow: %v %v", desc.GetWorkflowExecutionInfo().GetStatus(), err)
	}
	wbWaitRun(t, g, id, runID, 30*time.Second, "running")

	if r := g.Do("POST", path+"/run", nil); r.Status != 409 || r.JSON["run_id"] != float64(runID) {
		t.Fatalf("run while active: %d %s", r.Status, r.Raw)
	}
	if r := g.Do("DELETE", path, nil); r.Status != 409 || r.JSON["code"] != "run_active" {
		t.Fatalf("delete while active: %d %s", r.Status, r.Raw)
	}
	wbWantStatus(t, g.Do("POST", fmt.Sprintf("%s/runs/%d/cancel", path, runID+100), nil), 404, "cancel unknown run")
	wbWantStatus(t, g.Do("POST", path+"/runs/x/cancel", nil), 400, "cancel non-integer")
	wbWantStatus(t, g.Do("POST", fmt.Sprintf("%s/tasks/99999/runs/%d/cancel", wb, runID), nil), 404, "cancel on unknown task")

	c := g.Do("POST", fmt.Sprintf("%s/runs/%d/cancel", path, runID), nil)
	wbWantStatus(t, c, 202, "cancel")
	run := wbWaitRun(t, g, id, runID, 30*time.Second, "cancelled")
	if run["error"] == "" || run["finished_at"] == nil {
		t.Fatalf("cancelled run %v", run)
	}
	if st := wbTaskStatus(t, g, id); st != "todo" {
		t.Fatalf("task after cancel: %s", st)
	}
	got := wbCollect(t, events, "run.cancelled", 10*time.Second)
	if fmt.Sprint(wbTypes(wbWithoutTurns(got))) != "[run.started run.cancelled]" {
		t.Fatalf("events %v", wbTypes(got))
	}
	if r := g.Do("POST", fmt.Sprintf("%s/runs/%d/cancel", path, runID), nil); r.Status != 409 || r.JSON["code"] != "run_not_active" {
		t.Fatalf("cancel twice: %d %s", r.Status, r.Raw)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		desc, err = g.Temporal.DescribeWorkflowExecution(context.Background(), fmt.Sprintf("task-%d", id), "")
		if err == nil && desc.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("workflow not cancelled: %v %v", desc.GetWorkflowExecutionInfo().GetStatus(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	wbWantStatus(t, g.Do("DELETE", path, nil), 204, "delete after cancel")
}

func TestWorkboardFailedRunAndRefusedRunRequests(t *testing.T) {
	g := wbStart(t, "")
	g.Fake.Script(fakellm.Rule{Contains: "Broken", Status: 400, Message: "model does not exist"})

	noAgent := wbCreateTask(t, g, map[string]any{"title": "No agent"})
	unknown := wbCreateTask(t, g, map[string]any{"title": "Unknown agent", "agent_id": "ghost"})
	disabled := wbCreateTask(t, g, map[string]any{"title": "Disabled agent", "agent_id": "off"})
	for _, id := range []int64{noAgent, unknown, disabled} {
		r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
		if r.Status != 400 || r.JSON["field"] != "agent_id" {
			t.Errorf("run of task %d: %d %s", id, r.Status, r.Raw)
		}
		if runs := g.Do("GET", fmt.Sprintf("%s/tasks/%d/runs", wb, id), nil); runs.JSON["count"] != float64(0) {
			t.Errorf("refused run left a record: %s", runs.Raw)
		}
		if st := wbTaskStatus(t, g, id); st != "todo" {
			t.Errorf("refused run changed the task: %s", st)
		}
	}
	wbWantStatus(t, g.Do("POST", wb+"/tasks/99999/run", nil), 404, "run unknown task")
	wbWantStatus(t, g.Do("POST", wb+"/tasks/abc/run", nil), 400, "run non-integer")

	id := wbCreateTask(t, g, map[string]any{"title": "Broken model", "agent_id": "talker"})
	events := wbSubscribe(t, g, fmt.Sprintf("task_id=%d&type=run.failed,run.finished", id), "")
	r := g.Do("POST", fmt.Sprintf("%s/tasks/%d/run", wb, id), nil)
	wbWantStatus(t, r, 202, "run")
	run := wbWaitRun(t, g, id, wbID(t, r), 60*time.Second, "failed", "finished")
	if run["status"] != "failed" || !strings.Contains(run["error"].(string), "model does not exist") {
		t.Fatalf("run %v", run)
	}
	if strings.Contains(run["error"].(string), "scheduledEventID") {
		t.Fatalf("error text carries Temporal internals: %q", run["error"])
	}
	if st := wbTaskStatus(t, g, id); st != "failed" {
		t.Fatalf("task after failure: %s", st)
	}
	got := wbCollect(t, events, "run.failed", 10*time.Second)
	if len(got) != 1 || got[0].Event.PayloadMap()["error"] == nil {
		t.Fatalf("events %+v", got)
	}
}

func TestWorkboardDisabledAndEventsBadInput(t *testing.T) {
	g := wbStart(t, "workboard: {enabled: false}\n")
	for _, m := range [][2]string{{"GET", wb + "/tasks"}, {"POST", wb + "/tasks"}, {"GET", wb + "/tasks/1"}, {"DELETE", wb + "/comments/1"}, {"GET", wb + "/artifacts/1/download"}} {
		r := g.Do(m[0], m[1], map[string]any{"title": "x"})
		if r.Status != 503 || r.JSON["error"] != "workboard not enabled" {
			t.Errorf("%s %s: %d %s", m[0], m[1], r.Status, r.Raw)
		}
	}
	for _, q := range []string{"task_id=abc", "task_id=-1", "last_event_id=x"} {
		if r := g.Do("GET", "/api/v1/events?"+q, nil); r.Status != 400 {
			t.Errorf("events?%s: %d %s", q, r.Status, r.Raw)
		}
	}
}
