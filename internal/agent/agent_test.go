package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
)

func TestParseValidDefinition(t *testing.T) {
	d, err := agentdef.Parse([]byte(`
id: reporter
name: Daily reporter
description: Writes the daily report
trigger: cron
schedule:
  cron: "0 7 * * *"
  output: {channel: webhook}
system_prompt: You write reports.
llm: {provider: openai, model: gpt-4o-mini, max_tokens: 800, temperature: 0.2}
channels: [webhook]
builtins: [write_file]
max_turns: 4
`), "reporter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != "reporter" || d.Schedule.Cron != "0 7 * * *" || d.LLM.MaxTokens != 800 || !d.IsEnabled() || d.File != "reporter.yaml" {
		t.Fatalf("%+v", d)
	}
}

func TestParseReportsFileLineKey(t *testing.T) {
	cases := []struct {
		body string
		want []string
	}{
		{"id: a\ntrigger: cron\nschedule:\n  cron: \"every tuesday\"\n", []string{"a.yaml:4", "schedule.cron", "every tuesday"}},
		{"id: a\nllm:\n  max_tokens: lots\n", []string{"a.yaml:3", "llm.max_tokens"}},
		{"id: Bad Id\n", []string{"a.yaml:1", "id"}},
		{"id: a\nbuiltins: [rm_rf]\n", []string{"a.yaml:2", "builtins", "rm_rf"}},
		{"id: a\ntrigger: telepathy\n", []string{"trigger", "telepathy"}},
		{"id: a\nllm: {provider: x, allowed_providers: [y]}\n", []string{"llm.provider"}},
		{"id: [a\n", []string{"a.yaml"}},
		{"- just\n- a list\n", []string{"mapping"}},
		{"name: no id\n", []string{"id: is required"}},
	}
	for _, c := range cases {
		_, err := agentdef.Parse([]byte(c.body), "a.yaml")
		if err == nil {
			t.Errorf("%q: expected an error", c.body)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: error %q lacks %q", c.body, err, w)
			}
		}
	}
}

func TestRegistryLoadsAndReloads(t *testing.T) {
	dir := t.TempDir()
	other := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("id: a\ndescription: first\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte("id: [\n"), 0o644)
	os.WriteFile(filepath.Join(other, "a.yml"), []byte("id: a\ndescription: shadowed\n"), 0o644)
	os.WriteFile(filepath.Join(other, "b.yml"), []byte("id: b\n"), 0o644)
	os.WriteFile(filepath.Join(other, "notes.txt"), []byte("not an agent"), 0o644)
	r := agentdef.NewRegistry([]string{dir, other, filepath.Join(dir, "missing")}, nil)
	if got := len(r.List()); got != 2 {
		t.Fatalf("want 2 agents, got %d", got)
	}
	a, _ := r.Get("a")
	if a.Description != "first" {
		t.Fatalf("first directory must win: %q", a.Description)
	}
	if len(r.LoadErrors()) != 2 {
		t.Fatalf("want broken + duplicate errors, got %v", r.LoadErrors())
	}
	changed := make(chan struct{}, 4)
	r.OnChange(func() { changed <- struct{}{} })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go r.Watch(ctx, 20*time.Millisecond)
	os.WriteFile(filepath.Join(dir, "c.yaml"), []byte("id: c\n"), 0o644)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no reload after a new file")
	}
	if _, ok := r.Get("c"); !ok {
		t.Fatal("c not loaded")
	}
}

// scripted is an Executor that answers turns from a list.
type scripted struct {
	turns []*llm.Response
	calls []TurnRequest
	tools []ToolInvocation
	box   *Toolbox
	dir   string
}

func (s *scripted) CallLLM(tr TurnRequest) (*llm.Response, error) {
	s.calls = append(s.calls, tr)
	if len(s.turns) == 0 {
		return nil, errors.New("no more turns")
	}
	r := s.turns[0]
	s.turns = s.turns[1:]
	return r, nil
}

func (s *scripted) CallTool(inv ToolInvocation) (ToolResult, error) {
	s.tools = append(s.tools, inv)
	return s.box.Execute(context.Background(), s.dir, agentdef.KnownBuiltins, inv.Call)
}

func TestLoopRunsToolsAndFinishes(t *testing.T) {
	dir := t.TempDir()
	ex := &scripted{box: NewToolbox(netguard.Policy{Enabled: true}, time.Second), dir: dir, turns: []*llm.Response{
		{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "write_file", Arguments: json.RawMessage(`{"path":"out/report.md","content":"# hi"}`)}}, Usage: llm.Usage{InputTokens: 10, OutputTokens: 5}},
		{ToolCalls: []llm.ToolCall{{ID: "c2", Name: "write_file", Arguments: json.RawMessage(`{"path":"../escape.md","content":"x"}`)}}},
		{Content: "done", Usage: llm.Usage{InputTokens: 20, OutputTokens: 2}},
	}}
	out, err := Run(ex, Input{Provider: "p", Model: "m", SystemPrompt: "sys", History: []llm.Message{{Role: "user", Content: "earlier"}, {Role: "assistant", Content: "ok"}},
		UserText: "write it", Tools: ToolsFor([]string{"write_file"}), ToolChoice: "required", MaxTurns: 5})
	if err != nil {
		t.Fatal(err)
	}
	if out.Reply != "done" || out.Turns != 3 || out.StopReason != StopFinished {
		t.Fatalf("%+v", out)
	}
	if out.Usage.InputTokens != 30 || out.Usage.OutputTokens != 7 {
		t.Fatalf("usage %+v", out.Usage)
	}
	if len(out.Files) != 1 || out.Files[0].Path != filepath.Join(dir, "out", "report.md") || out.Files[0].SizeBytes != 4 {
		t.Fatalf("files %+v", out.Files)
	}
	if ex.calls[0].Request.ToolChoice != "required" || ex.calls[1].Request.ToolChoice != "" {
		t.Fatal("tool_choice must apply to the first turn only")
	}
	first := ex.calls[0].Request.Messages
	if first[0].Role != "system" || first[1].Content != "earlier" || first[3].Content != "write it" {
		t.Fatalf("messages %+v", first)
	}
	last := ex.calls[2].Request.Messages
	escaped := last[len(last)-1]
	if escaped.Role != "tool" || !strings.Contains(escaped.Content, "leaves the work directory") {
		t.Fatalf("escape not refused: %+v", escaped)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "escape.md")); err == nil {
		t.Fatal("file written outside the work directory")
	}
	// user + 3 assistant + 2 tool messages
	if len(out.NewMessages) != 6 {
		t.Fatalf("new messages %d", len(out.NewMessages))
	}
}

func TestLoopStopsAtMaxTurns(t *testing.T) {
	call := &llm.Response{Content: "thinking", ToolCalls: []llm.ToolCall{{ID: "c", Name: "read_file", Arguments: json.RawMessage(`{"path":"x"}`)}}}
	ex := &scripted{box: NewToolbox(netguard.Policy{}, time.Second), dir: t.TempDir(), turns: []*llm.Response{call, call, call, call}}
	out, err := Run(ex, Input{UserText: "go", MaxTurns: 2})
	if err != nil {
		t.Fatal(err)
	}
	if out.StopReason != StopMaxTurns || len(ex.calls) != 2 || len(ex.tools) != 1 || out.Reply != "thinking" {
		t.Fatalf("%+v calls=%d tools=%d", out, len(ex.calls), len(ex.tools))
	}
}

func TestConfinedPathRefusesSymlinkEscape(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	os.Symlink(outside, filepath.Join(root, "link"))
	for _, p := range []string{"/etc/passwd", "../x", "a/../../x", "link/x", ""} {
		if _, err := ConfinedPath(root, p); err == nil {
			t.Errorf("%q allowed", p)
		}
	}
	if p, err := ConfinedPath(root, "a/b/../c.txt"); err != nil || !strings.HasSuffix(p, filepath.Join("a", "c.txt")) {
		t.Errorf("inner path: %q %v", p, err)
	}
}

func TestHTTPGetSSRF(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
	defer srv.Close()
	call := llm.ToolCall{Name: "http_get", Arguments: json.RawMessage(`{"url":"` + srv.URL + `"}`)}
	blocked := NewToolbox(netguard.Policy{Enabled: true}, time.Second)
	res, err := blocked.Execute(context.Background(), t.TempDir(), agentdef.KnownBuiltins, call)
	if err != nil || !res.IsError || !strings.Contains(res.Content, "not allowed") {
		t.Fatalf("loopback fetch not refused: %+v %v", res, err)
	}
	allowed := NewToolbox(netguard.Policy{Enabled: true, AllowLoopback: true}, time.Second)
	res, err = allowed.Execute(context.Background(), t.TempDir(), agentdef.KnownBuiltins, call)
	if err != nil || res.IsError || !strings.Contains(res.Content, "hello") {
		t.Fatalf("allowed fetch: %+v %v", res, err)
	}
	res, _ = allowed.Execute(context.Background(), t.TempDir(), []string{"read_file"}, call)
	if !res.IsError {
		t.Fatal("a tool the agent does not list must be refused")
	}
}
