// Package browser drives the operator console (internal/console) in a real
// headless Chromium against a real gateway started in-process with the
// scripted fake LLM. One gateway and one browser serve the whole test
// binary: TestConsole walks through the pages as an operator would.
//
// Screenshots go to $AGENTRY_CONSOLE_SCREENSHOTS (default a temp folder,
// logged); `AGENTRY_CONSOLE_SCREENSHOTS=$PWD/docs/console` refreshes the
// committed ones.
package browser

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/dev/testenv"
)

func TestMain(m *testing.M) { gatewaytest.Main(m) }

var consoleAgents = map[string]string{
	"writer.yaml": "id: writer\ndescription: writes files\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\nmax_turns: 4\nsystem_prompt: You write files.\n",
	"guarded.yaml": "id: guarded\ndescription: writes files once a person approves\nllm: {provider: ollama, model: llama3.2}\nbuiltins: [write_file]\n" +
		"max_turns: 4\napprovals: {tools: [write_file], timeout: 1h}\nsystem_prompt: You write files.\n",
	"talker.yaml": "id: talker\ndescription: answers questions\nllm: {provider: ollama, model: llama3.2}\nsystem_prompt: You answer briefly.\n",
	"reporter.yaml": "id: reporter\ndescription: daily status\nllm: {provider: ollama, model: llama3.2}\ntrigger: cron\n" +
		"schedule: {cron: \"0 9 * * *\", prompt: status report please}\n",
}

// session is the browser and what it saw: every request the page made.
type session struct {
	ctx      context.Context
	base     string
	shots    string
	download string

	mu        sync.Mutex
	requests  []seenRequest
	jsErrors  []string
	downloads map[string]string // guid -> state
}

type seenRequest struct {
	URL     string
	Method  string
	Headers map[string]any
}

func newSession(t *testing.T, chrome, base string, extra ...chromedp.ExecAllocatorOption) *session {
	t.Helper()
	shots := os.Getenv("AGENTRY_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "agentry-console-screenshots")
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", shots)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 800),
		chromedp.Flag("disable-dev-shm-usage", true))
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp logs CDP events it does not model (newer Chromium sends
	// some); they are noise for these tests.
	quiet := func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled") {
			t.Log(msg)
		}
	}
	ctx, cancelCtx := chromedp.NewContext(alloc, chromedp.WithErrorf(quiet), chromedp.WithLogf(quiet))
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	s := &session{ctx: ctx, base: base, shots: shots, download: t.TempDir(), downloads: map[string]string{}}
	chromedp.ListenTarget(ctx, func(ev any) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			s.requests = append(s.requests, seenRequest{URL: e.Request.URL, Method: e.Request.Method, Headers: e.Request.Headers})
		case *runtime.EventExceptionThrown:
			s.jsErrors = append(s.jsErrors, e.ExceptionDetails.Error())
		case *browser.EventDownloadProgress:
			s.downloads[e.GUID] = e.State.String()
		}
	})
	// The first Run starts the browser and must use the session's own
	// context: cancelling a derived one would close the browser again.
	if err := chromedp.Run(ctx, network.Enable(), runtime.Enable(), chromedp.EmulateViewport(1280, 800),
		browser.SetDownloadBehavior(browser.SetDownloadBehaviorBehaviorAllowAndName).WithDownloadPath(s.download).WithEventsEnabled(true)); err != nil {
		t.Fatalf("start %s: %v", chrome, err)
	}
	return s
}

// do runs browser actions within timeout; on failure it saves a
// screenshot of what the page showed and fails the test.
func (s *session) do(t *testing.T, timeout time.Duration, what string, actions ...chromedp.Action) {
	t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var buf []byte
		sctx, scancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer scancel()
		if chromedp.Run(sctx, chromedp.CaptureScreenshot(&buf)) == nil {
			name := filepath.Join(s.shots, "failed-"+sanitize(t.Name())+".png")
			os.WriteFile(name, buf, 0o644)
			t.Logf("page at failure: %s", name)
		}
		s.mu.Lock()
		t.Logf("JavaScript errors: %v", s.jsErrors)
		s.mu.Unlock()
		t.Fatalf("%s: %v", what, err)
	}
}

func (s *session) screenshot(t *testing.T, name string) {
	t.Helper()
	var buf []byte
	s.do(t, 20*time.Second, "screenshot "+name, chromedp.Sleep(150*time.Millisecond), chromedp.CaptureScreenshot(&buf))
	if err := os.WriteFile(filepath.Join(s.shots, name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (s *session) text(t *testing.T, sel string) string {
	t.Helper()
	var out string
	s.do(t, 20*time.Second, "read "+sel, chromedp.WaitVisible(sel), chromedp.Text(sel, &out))
	return out
}

// waitFor polls a JavaScript expression until it is true.
func (s *session) waitFor(t *testing.T, timeout time.Duration, what, expr string) {
	t.Helper()
	var ok bool
	s.do(t, timeout, what, chromedp.Poll(expr, &ok, chromedp.WithPollingInterval(50*time.Millisecond)))
}

func (s *session) eval(t *testing.T, expr string, out any) {
	t.Helper()
	s.do(t, 20*time.Second, "evaluate "+expr, chromedp.Evaluate(expr, out))
}

func (s *session) seen() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.requests...)
}

// drag presses the mouse on the centre of from, moves in steps to the
// centre of to and releases it: the pointer events a person's drag makes.
func (s *session) drag(t *testing.T, from, to string) {
	t.Helper()
	var a, b []float64
	s.eval(t, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return [r.x + r.width/2, r.y + 12]; })()`, from), &a)
	s.eval(t, fmt.Sprintf(`(() => { const r = document.querySelector(%q).getBoundingClientRect(); return [r.x + r.width/2, r.y + r.height/2]; })()`, to), &b)
	actions := []chromedp.Action{input.DispatchMouseEvent(input.MousePressed, a[0], a[1]).WithButton(input.Left).WithButtons(1).WithClickCount(1)}
	for i := 1; i <= 10; i++ {
		x, y := a[0]+(b[0]-a[0])*float64(i)/10, a[1]+(b[1]-a[1])*float64(i)/10
		actions = append(actions, input.DispatchMouseEvent(input.MouseMoved, x, y).WithButton(input.Left).WithButtons(1))
	}
	actions = append(actions, input.DispatchMouseEvent(input.MouseReleased, b[0], b[1]).WithButton(input.Left).WithButtons(0).WithClickCount(1))
	s.do(t, 20*time.Second, "drag "+from+" to "+to, actions...)
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') || r == '-' {
			return r
		}
		return '-'
	}, s)
}

func TestConsole(t *testing.T) {
	chrome := testenv.Chromium(t)
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: consoleAgents, Config: `
temporal: {ui_url: "http://127.0.0.1:8233"}
costs: {daily_budget_usd: 5, monthly_budget_usd: 100}
`})
	u, _ := url.Parse(g.URL())
	proxy := startProxy(t, u.Host)
	s := newSession(t, chrome, proxy.URL())
	key := gatewaytest.TestAPIKey

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"SignInRefusesAWrongKey", func(t *testing.T) {
			s.do(t, 30*time.Second, "open the console", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible("#credential"))
			s.do(t, 20*time.Second, "sign in with a wrong key",
				chromedp.SendKeys("#credential", "not-the-key"), chromedp.Click("#signin-form button"),
				chromedp.WaitVisible("#signin-error"))
			if msg := s.text(t, "#signin-error"); !strings.Contains(msg, "did not accept this API key or token") {
				t.Fatalf("sign-in error %q", msg)
			}
			s.screenshot(t, "signin-error")
		}},
		{"SignIn", func(t *testing.T) {
			s.do(t, 30*time.Second, "sign in",
				chromedp.Evaluate(`document.getElementById("credential").value = ""`, nil), chromedp.SendKeys("#credential", key), chromedp.Click("#signin-form button"),
				chromedp.WaitVisible(`#board[data-ready="true"]`), chromedp.WaitVisible(`.stream-state[data-state="open"]`))
			var href, stored string
			s.eval(t, `location.href`, &href)
			s.eval(t, `sessionStorage.getItem("agentry.credential")`, &stored)
			if strings.Contains(href, key) || stored != key {
				t.Fatalf("credential in URL %q or not in sessionStorage (%q)", href, stored)
			}
		}},
		{"CreateTaskAndDragIt", func(t *testing.T) {
			s.do(t, 30*time.Second, "create a task in the dialog",
				chromedp.Click("#new-task"), chromedp.WaitVisible("#task-dialog"),
				chromedp.SendKeys("#tf-title", "Quarterly report"), chromedp.SetValue("#tf-agent", "writer"),
				chromedp.SendKeys("#tf-owner", "ana"), chromedp.SetValue("#tf-priority", "high"),
				chromedp.SendKeys("#tf-tags", "finance, q3"), chromedp.SetValue("#tf-due", "2026-12-01"),
				chromedp.Click(`#task-dialog button[type="submit"]`),
				chromedp.WaitVisible(`.column[data-status="todo"] .card`))
			r := g.Do("GET", "/api/v1/workboard/tasks", nil)
			tasks := r.JSON["tasks"].([]any)
			if len(tasks) != 1 {
				t.Fatalf("tasks %s", r.Raw)
			}
			task := tasks[0].(map[string]any)
			if task["title"] != "Quarterly report" || task["agent_id"] != "writer" || task["owner"] != "ana" || task["priority"] != "high" ||
				fmt.Sprint(task["tags"]) != "[finance q3]" || task["due_at"] != "2026-12-01T00:00:00Z" {
				t.Fatalf("created task %v", task)
			}
			s.screenshot(t, "board")
			s.drag(t, `.card[data-id="1"]`, `.column[data-status="done"]`)
			s.do(t, 20*time.Second, "card lands in done", chromedp.WaitVisible(`.column[data-status="done"] .card[data-id="1"]`))
			waitStatus(t, g, 1, "done")
			// The keyboard way: Alt+ArrowLeft moves the focused card one column left.
			s.do(t, 20*time.Second, "move with the keyboard",
				chromedp.Focus(`.card[data-id="1"]`), chromedp.KeyEvent(kb.ArrowLeft, chromedp.KeyModifiers(input.ModifierAlt)),
				chromedp.WaitVisible(`.column[data-status="needs_review"] .card[data-id="1"]`))
			waitStatus(t, g, 1, "needs_review")
		}},
		{"RunShowsTheTimelineAndTheArtifact", func(t *testing.T) {
			g.Fake.Script(
				fakellm.Rule{Contains: "wrote", Reply: "The report is written."},
				fakellm.Rule{Contains: "Quarterly report", ToolCalls: []fakellm.ToolCall{
					fakellm.NewToolCall("write_file", map[string]string{"path": "out/report.md", "content": "# Q3\n"})}},
			)
			s.do(t, 20*time.Second, "open the task", chromedp.Click(`.card[data-id="1"] .title`), chromedp.WaitVisible("#task-panel #run-task:not([disabled])"))
			s.do(t, 120*time.Second, "run it and see the timeline reach the end",
				chromedp.Click("#run-task"),
				chromedp.WaitVisible(`#timeline li[data-type="run.started"]`),
				chromedp.WaitVisible(`#timeline li[data-type="run.artifact"]`),
				chromedp.WaitVisible(`#timeline li[data-type="run.finished"]`),
				chromedp.WaitVisible(`#panel-runs li[data-status="finished"]`),
				chromedp.WaitVisible(`#artifacts button[data-artifact-id]`))
			var link string
			s.do(t, 10*time.Second, "Temporal link", chromedp.AttributeValue(`#panel-runs a`, "href", &link, nil))
			if !strings.HasPrefix(link, "http://127.0.0.1:8233/namespaces/default/workflows/task-1/") {
				t.Fatalf("Temporal Web UI link %q", link)
			}
			s.screenshot(t, "run-panel")
			s.do(t, 10*time.Second, "download the artifact", chromedp.Click(`#artifacts button[data-artifact-id]`))
			var data []byte
			deadline := time.Now().Add(20 * time.Second)
			for data == nil {
				s.mu.Lock()
				for guid, state := range s.downloads {
					if state == "completed" {
						data, _ = os.ReadFile(filepath.Join(s.download, guid))
					}
				}
				s.mu.Unlock()
				if time.Now().After(deadline) {
					t.Fatal("the artifact download did not complete")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if string(data) != "# Q3\n" {
				t.Fatalf("downloaded %q", data)
			}
			s.do(t, 20*time.Second, "accept the review",
				chromedp.WaitVisible("#review-accept"), chromedp.SendKeys("#comment-body", "Looks good."), chromedp.Click("#review-accept"),
				chromedp.WaitVisible(`#panel-status.status-done`), chromedp.WaitVisible(`#timeline li[data-type="comment.created"]`),
				chromedp.WaitVisible(`.column[data-status="done"] .card[data-id="1"]`))
			s.do(t, 10*time.Second, "close the panel", chromedp.Click(`#task-panel header button`), chromedp.WaitNotPresent("#task-panel"))
		}},
		{"AnAPIErrorShowsItsText", func(t *testing.T) {
			created := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Ghost task", "agent_id": "ghost"})
			id := int(created.JSON["id"].(float64))
			want := g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", id), nil)
			if want.Status != 400 {
				t.Fatalf("run of a task with an unknown agent: %s", want.Raw)
			}
			card := fmt.Sprintf(`.card[data-id="%d"]`, id)
			s.do(t, 20*time.Second, "run a task whose agent does not exist",
				chromedp.WaitVisible(card), chromedp.Click(card+" .title"), chromedp.WaitVisible("#task-panel #run-task:not([disabled])"),
				chromedp.Click("#run-task"), chromedp.WaitVisible(`#alerts .alert[data-kind="error"]`))
			if msg := s.text(t, `#alerts .alert[data-kind="error"] p`); !strings.Contains(msg, want.JSON["error"].(string)) {
				t.Fatalf("alert %q does not show the API's error %q", msg, want.JSON["error"])
			}
			s.screenshot(t, "api-error")
			s.do(t, 10*time.Second, "close the panel", chromedp.Click(`#task-panel header button`), chromedp.WaitNotPresent("#task-panel"))
		}},
		{"ALostEventStreamResumesAndMissesNothing", func(t *testing.T) {
			g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "Before the cut"})
			s.do(t, 20*time.Second, "the board sees it live", chromedp.WaitVisible(`.card[data-id="3"]`))
			var last string
			s.eval(t, `document.getElementById("board").dataset.lastEventId`, &last)
			lists := countRequests(s.seen(), "GET", "/api/v1/workboard/tasks?")
			cutAt := len(s.seen())
			proxy.Cut(true)
			s.do(t, 20*time.Second, "the page notices", chromedp.WaitVisible(`.stream-state[data-state="reconnecting"]`))
			for i := 1; i <= 3; i++ {
				g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": fmt.Sprintf("During the cut %d", i)})
			}
			proxy.Resume()
			s.do(t, 60*time.Second, "every task made during the cut appears",
				chromedp.WaitVisible(`.card[data-id="4"]`), chromedp.WaitVisible(`.card[data-id="5"]`), chromedp.WaitVisible(`.card[data-id="6"]`),
				chromedp.WaitVisible(`.stream-state[data-state="open"]`))
			resumed := false
			for _, r := range s.seen()[cutAt:] {
				for name, v := range r.Headers {
					if strings.Contains(r.URL, "/api/v1/events") && strings.EqualFold(name, "Last-Event-ID") && v == last {
						resumed = true
					}
				}
			}
			if !resumed {
				t.Fatalf("no reconnect sent Last-Event-ID %s", last)
			}
			if n := countRequests(s.seen(), "GET", "/api/v1/workboard/tasks?"); n != lists {
				t.Fatalf("the board reloaded its list (%d -> %d list requests): the resume should have replayed the events", lists, n)
			}
		}},
		{"ApproveAParkedRunFromTheConsole", func(t *testing.T) {
			g.Fake.Script(
				fakellm.Rule{Contains: "wrote", Reply: "The notes are written."},
				fakellm.Rule{Contains: "Release notes", ToolCalls: []fakellm.ToolCall{
					fakellm.NewToolCall("write_file", map[string]string{"path": "notes.md", "content": "# 1.4\n"})}},
				fakellm.Rule{Contains: "Risky change", ToolCalls: []fakellm.ToolCall{
					fakellm.NewToolCall("write_file", map[string]string{"path": "risky.md", "content": "x"})}},
			)
			// park starts a run of a new task for the guarded agent; the
			// board shows the card with the waiting badge.
			park := func(title string) (int, int) {
				created := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": title, "agent_id": "guarded"})
				id := int(created.JSON["id"].(float64))
				run := g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", id), nil)
				if run.Status != 202 {
					t.Fatalf("start run: %s", run.Raw)
				}
				s.do(t, 90*time.Second, "the card shows its run waits for approval",
					chromedp.WaitVisible(fmt.Sprintf(`.card[data-id="%d"] .badge[data-waiting="approval"]`, id)))
				return id, int(run.JSON["id"].(float64))
			}
			s.do(t, 20*time.Second, "back to the board", chromedp.Navigate(s.base+"/#/board"), chromedp.WaitVisible(`#board[data-ready="true"]`))
			id, runID := park("Release notes")
			riskyID, riskyRun := park("Risky change")
			approvalOf := func(task int) map[string]any {
				for _, a := range g.Do("GET", fmt.Sprintf("/api/v1/approvals?task_id=%d", task), nil).JSON["approvals"].([]any) {
					return a.(map[string]any)
				}
				t.Fatalf("no approval for task %d", task)
				return nil
			}
			mine, risky := fmt.Sprint(approvalOf(id)["id"]), fmt.Sprint(approvalOf(riskyID)["id"])
			item := func(approval string) string { return fmt.Sprintf(`.approval[data-approval-id="%s"]`, approval) }

			s.do(t, 30*time.Second, "follow the badge to the queue",
				chromedp.Click(fmt.Sprintf(`.card[data-id="%d"] .badge`, id)), chromedp.WaitVisible(`#approvals[data-ready="true"]`),
				chromedp.WaitVisible(item(mine)+` pre.args`), chromedp.WaitVisible(item(risky)), chromedp.WaitVisible(`.stream-state[data-state="open"]`))
			if args := s.text(t, item(mine)+" pre.args"); !strings.Contains(args, "notes.md") {
				t.Fatalf("arguments shown: %q", args)
			}
			s.screenshot(t, "approvals")

			// The second run ends (cancelled) while the page hears no events:
			// deciding its call then answers 409, whose text the page shows
			// before reading the queue again.
			proxy.HoldStreams()
			s.do(t, 20*time.Second, "the page loses its stream", chromedp.WaitVisible(`.stream-state[data-state="reconnecting"]`))
			if r := g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/runs/%d/cancel", riskyID, riskyRun), nil); r.Status >= 300 {
				t.Fatalf("cancel: %s", r.Raw)
			}
			deadline := time.Now().Add(60 * time.Second)
			for approvalOf(riskyID)["status"] != "cancelled" {
				if time.Now().After(deadline) {
					t.Fatalf("approval of the cancelled run: %v", approvalOf(riskyID))
				}
				time.Sleep(100 * time.Millisecond)
			}
			s.do(t, 30*time.Second, "approve the cancelled run's call",
				chromedp.Click(item(risky)+` button[data-decision="approve"]`),
				chromedp.WaitVisible(`#alerts .alert[data-kind="error"]`), chromedp.WaitNotPresent(item(risky)))
			want := g.Do("POST", "/api/v1/approvals/"+risky, map[string]any{"decision": "approve"})
			if want.Status != 409 {
				t.Fatalf("deciding a cancelled approval: %s", want.Raw)
			}
			if msg := s.text(t, `#alerts .alert[data-kind="error"] p`); !strings.Contains(msg, want.JSON["error"].(string)) {
				t.Fatalf("alert %q does not show the API's error %q", msg, want.JSON["error"])
			}
			proxy.ResumeStreams()
			s.do(t, 30*time.Second, "the stream is back", chromedp.WaitVisible(`.stream-state[data-state="open"]`), chromedp.WaitVisible(item(mine)))

			// Approve with the keyboard: the comment field, then the button.
			s.do(t, 30*time.Second, "approve with a comment",
				chromedp.SendKeys("#approval-comment-"+mine, "Go ahead."),
				chromedp.Focus(item(mine)+` button[data-decision="approve"]`), chromedp.KeyEvent(kb.Enter),
				chromedp.WaitNotPresent(item(mine)), chromedp.WaitVisible(`#approvals .empty`))
			waitRun(t, g, id, runID, "finished")
			if a := g.Do("GET", "/api/v1/approvals/"+mine, nil); a.JSON["status"] != "approved" || a.JSON["comment"] != "Go ahead." {
				t.Fatalf("approval after the console's decision: %s", a.Raw)
			}

			s.do(t, 60*time.Second, "the run panel tells the story",
				chromedp.Navigate(s.base+"/#/board"), chromedp.WaitVisible(`#board[data-ready="true"]`),
				chromedp.WaitNotPresent(fmt.Sprintf(`.card[data-id="%d"] .badge`, id)),
				chromedp.WaitNotPresent(fmt.Sprintf(`.card[data-id="%d"] .badge`, riskyID)),
				chromedp.Click(fmt.Sprintf(`.card[data-id="%d"] .title`, id)),
				chromedp.WaitVisible(`#timeline li[data-type="run.approval_requested"]`),
				chromedp.WaitVisible(`#timeline li[data-type="run.approval_decided"].ok`),
				chromedp.WaitVisible(`#timeline li[data-type="run.finished"]`),
				chromedp.WaitVisible(`#panel-runs li[data-status="finished"]`))
			if text := s.text(t, `#timeline li[data-type="run.approval_decided"]`); !strings.Contains(text, "approved by") || !strings.Contains(text, "Go ahead.") {
				t.Fatalf("decision in the timeline: %q", text)
			}
			s.screenshot(t, "run-panel-approval")
			s.do(t, 10*time.Second, "close the panel", chromedp.Click(`#task-panel header button`), chromedp.WaitNotPresent("#task-panel"))
		}},
		{"Chat", func(t *testing.T) {
			g.Fake.Script(fakellm.Rule{Contains: "Say hello", Reply: "Hello from the fake model, streamed in pieces.", Chunks: 6, ChunkDelay: fakellm.Duration(40 * time.Millisecond)})
			s.do(t, 60*time.Second, "stream a chat reply",
				chromedp.Navigate(s.base+"/#/chat"), chromedp.WaitReady(`#chat-agent option[value="talker"]`),
				chromedp.SetValue("#chat-agent", "talker"), chromedp.SendKeys("#chat-input", "Say hello"), chromedp.Click("#chat-send"),
				chromedp.WaitVisible(`.msg.agent[data-done="true"]`))
			if got := s.text(t, `.msg.agent .body`); got != "Hello from the fake model, streamed in pieces." {
				t.Fatalf("chat reply %q", got)
			}
			s.screenshot(t, "chat")
			s.do(t, 20*time.Second, "rate the reply",
				chromedp.Click(`.msg.agent .feedback button[aria-label="Helpful"]`), chromedp.WaitVisible(`.msg.agent .feedback [role="status"]`))
			r := g.Do("GET", "/api/v1/learning/feedback", nil)
			if r.JSON["count"] != float64(1) {
				t.Fatalf("feedback %s", r.Raw)
			}
		}},
		{"Costs", func(t *testing.T) {
			s.do(t, 30*time.Second, "open the costs page",
				chromedp.Navigate(s.base+"/#/costs"), chromedp.WaitVisible("#costs-readiness"),
				chromedp.WaitVisible("#chargeback-chart svg"), chromedp.WaitVisible("#chargeback-table tbody tr"))
			s.screenshot(t, "costs")
			s.do(t, 20*time.Second, "chargeback by model",
				chromedp.Click(`.tabs button[data-dim="model"]`), chromedp.WaitVisible(`.tabs button[data-dim="model"][aria-pressed="true"]`))
			s.waitFor(t, 20*time.Second, "model rows", `[...document.querySelectorAll("#chargeback-table tbody td")].some(td => td.textContent === "llama3.2")`)
		}},
		{"AgentsAndSchedules", func(t *testing.T) {
			s.do(t, 30*time.Second, "open the agents page",
				chromedp.Navigate(s.base+"/#/agents"), chromedp.WaitVisible(`#agents tr[data-agent="reporter"]`))
			s.screenshot(t, "agents")
			s.do(t, 20*time.Second, "disable an agent",
				chromedp.Click(`button[data-agent="talker"]`), chromedp.WaitVisible(`tr[data-agent="talker"] .status-failed`))
			if r := g.Do("GET", "/api/v1/agents/talker", nil); r.JSON["enabled"] != false {
				t.Fatalf("after disable: %s", r.Raw)
			}
			s.do(t, 20*time.Second, "enable it again",
				chromedp.Click(`button[data-agent="talker"]`), chromedp.WaitNotPresent(`tr[data-agent="talker"] .status-failed`))
		}},
		{"PhoneWidthAndDark", func(t *testing.T) {
			s.do(t, 30*time.Second, "phone width, dark",
				chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
				emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}),
				chromedp.Navigate(s.base+"/#/board"), chromedp.WaitVisible(`#board[data-ready="true"]`))
			var overflow bool
			s.eval(t, `document.documentElement.scrollWidth > window.innerWidth + 1`, &overflow)
			if overflow {
				t.Fatal("the board is wider than a phone screen")
			}
			s.screenshot(t, "board-phone-dark")
			s.do(t, 30*time.Second, "back to 1280x800, light",
				chromedp.EmulateViewport(1280, 800),
				emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))
		}},
		{"PageLoadFigures", func(t *testing.T) {
			s.do(t, 30*time.Second, "reload the board", chromedp.Navigate(s.base+"/#/board"), chromedp.Reload(), chromedp.WaitVisible(`#board[data-ready="true"]`))
			var fig struct {
				Rendered float64 `json:"rendered"`
				Assets   int     `json:"assets"`
				Bytes    int     `json:"bytes"`
			}
			s.eval(t, `(() => {
				const own = performance.getEntriesByType("resource").filter(e => new URL(e.name).pathname.startsWith("/console/"));
				const nav = performance.getEntriesByType("navigation")[0];
				return {rendered: performance.getEntriesByName("agentry-board-rendered")[0].startTime,
					assets: own.length + 1, bytes: own.reduce((n, e) => n + e.decodedBodySize, nav.decodedBodySize)};
			})()`, &fig)
			t.Logf("page load: %d files, %d bytes of assets, board rendered %.0f ms after navigation start", fig.Assets, fig.Bytes, fig.Rendered)
		}},
		{"AnExpiredSessionReturnsToSignIn", func(t *testing.T) {
			s.do(t, 30*time.Second, "a credential that stopped working",
				chromedp.Evaluate(`sessionStorage.setItem("agentry.credential", "revoked-key")`, nil), chromedp.Reload(),
				chromedp.WaitVisible("#signin-error"))
			if msg := s.text(t, "#signin-error"); !strings.Contains(msg, "sign in again") {
				t.Fatalf("expired session message %q", msg)
			}
		}},
		{"NothingLoadsFromOutsideTheGateway", func(t *testing.T) {
			reqs := s.seen()
			if len(reqs) < 20 {
				t.Fatalf("only %d requests recorded", len(reqs))
			}
			for _, r := range reqs {
				if strings.Contains(r.URL, key) {
					t.Errorf("credential in a URL: %s", r.URL)
				}
				if strings.HasPrefix(r.URL, "data:") || strings.HasPrefix(r.URL, "blob:") {
					continue
				}
				if !strings.HasPrefix(r.URL, s.base+"/") {
					t.Errorf("request outside the gateway: %s %s", r.Method, r.URL)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.jsErrors) > 0 {
				t.Errorf("JavaScript errors: %v", s.jsErrors)
			}
		}},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.fn) {
			t.Fatalf("step %s failed; the later steps build on it", st.name)
		}
	}
}

func countRequests(reqs []seenRequest, method, pathPrefix string) int {
	n := 0
	for _, r := range reqs {
		if u, err := url.Parse(r.URL); err == nil && r.Method == method && strings.HasPrefix(u.RequestURI(), pathPrefix) {
			n++
		}
	}
	return n
}

// waitRun waits until a run has the status.
func waitRun(t *testing.T, g *gatewaytest.Gateway, task, run int, status string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r := g.Do("GET", fmt.Sprintf("/api/v1/workboard/tasks/%d/runs/%d", task, run), nil)
		if r.JSON["status"] == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d of task %d: %s, want %s", run, task, r.Raw, status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitStatus waits until the gateway has saved a task's new status (the
// page shows a move at once and saves it in the background).
func waitStatus(t *testing.T, g *gatewaytest.Gateway, id int, status string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := g.Do("GET", fmt.Sprintf("/api/v1/workboard/tasks/%d", id), nil)
		if r.JSON["status"] == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d: status %v, want %s", id, r.JSON["status"], status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
