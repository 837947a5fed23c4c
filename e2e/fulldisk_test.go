package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestFullDiskAnswers507AndRecovers puts the application database on a
// small tmpfs, fills it, and checks what a user sees (issue 18 item 6):
// writes answer 507 with Retry-After and a clear error instead of a bare
// 500, /health turns degraded (503) naming the database, and both recover by
// themselves once space returns; a task run caught by it says why in its
// record (stalled_reason) and finishes once space returns.
func TestFullDiskAnswers507AndRecovers(t *testing.T) {
	disk := mountSmallTmpfs(t, "8m")
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: agentsFor(), Config: "storage: {backend: sqlite, dsn: " + filepath.Join(disk, "agentry.db") + "}\n"})
	if r := g.Do("GET", "/health", nil); r.Status != 200 {
		t.Fatalf("health before: %d %s", r.Status, r.Raw)
	}

	// A run in the middle of a (slow) LLM call when the disk fills.
	g.Fake.Script(fakellm.Rule{Contains: "stalls on a full disk", Reply: "done after all", Delay: fakellm.Duration(2 * time.Second)})
	task := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "stalls on a full disk", "agent_id": "gpt"})
	if task.Status != 201 {
		t.Fatalf("create task: %d %s", task.Status, task.Raw)
	}
	taskID := int64(task.JSON["id"].(float64))
	started := g.Do("POST", fmt.Sprintf("/api/v1/workboard/tasks/%d/run", taskID), nil)
	if started.Status != 202 {
		t.Fatalf("start run: %d %s", started.Status, started.Raw)
	}
	runPath := fmt.Sprintf("/api/v1/workboard/tasks/%d/runs/%d", taskID, int64(started.JSON["id"].(float64)))
	// Tests share one Temporal server and task ids restart at 1 in each
	// test's database: a run this test leaves behind (it retries for as
	// long as the disk is full) would block the next test's task-1.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Temporal.TerminateWorkflow(ctx, fmt.Sprintf("task-%d", taskID), "", "test cleanup")
	})
	waitRun(t, g, runPath, 30*time.Second, func(r gatewaytest.Response) bool { return r.JSON["status"] == "running" })

	filler := filepath.Join(disk, "filler")
	fillDisk(t, filler)

	// Small writes may still fit into the WAL file's existing space; keep
	// writing until one needs a new page.
	desc := strings.Repeat("x", 16<<10)
	var full gatewaytest.Response
	for i := 0; i < 400; i++ {
		r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "disk filler", "description": desc})
		if r.Status == 201 {
			continue
		}
		full = r
		break
	}
	if full.Status != 507 {
		t.Fatalf("write on a full disk: want 507, got %d %s", full.Status, full.Raw)
	}
	if full.JSON["code"] != "storage_full" || !strings.Contains(full.JSON["error"].(string), "out of space") {
		t.Fatalf("507 body: %s", full.Raw)
	}
	if ra := full.Header.Get("Retry-After"); ra == "" {
		t.Fatalf("507 without Retry-After: %v", full.Header)
	}
	if strings.Contains(string(full.Raw), disk) || strings.Contains(strings.ToLower(string(full.Raw)), "insert") {
		t.Fatalf("507 leaks a path or SQL: %s", full.Raw)
	}
	h := g.Do("GET", "/health", nil)
	if h.Status != 503 || h.JSON["status"] != "degraded" || !strings.Contains(string(h.Raw), "out of space") {
		t.Fatalf("health on a full disk: want 503 degraded naming the database, got %d %s", h.Status, h.Raw)
	}

	stalled := waitRun(t, g, runPath, 60*time.Second, func(r gatewaytest.Response) bool {
		reason, _ := r.JSON["stalled_reason"].(string)
		return strings.Contains(reason, "out of space")
	})
	if stalled.JSON["status"] != "running" {
		t.Fatalf("stalled run: %s", stalled.Raw)
	}
	t.Logf("stalled_reason: %s", stalled.JSON["stalled_reason"])

	// Space returns: no restart, no operator action beyond freeing space.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		h = g.Do("GET", "/health", nil)
		if h.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health after space returned: %d %s", h.Status, h.Raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if r := g.Do("POST", "/api/v1/workboard/tasks", map[string]any{"title": "after the disk was freed"}); r.Status != 201 {
		t.Fatalf("write after space returned: %d %s", r.Status, r.Raw)
	}
	done := waitRun(t, g, runPath, 90*time.Second, func(r gatewaytest.Response) bool { return r.JSON["status"] != "running" })
	if done.JSON["status"] != "finished" || done.JSON["reply"] != "done after all" || done.JSON["stalled_reason"] != nil {
		t.Fatalf("run after space returned: %s", done.Raw)
	}
}

// waitRun polls a run until ok says so.
func waitRun(t *testing.T, g *gatewaytest.Gateway, path string, within time.Duration, ok func(gatewaytest.Response) bool) gatewaytest.Response {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := g.Do("GET", path, nil)
		if r.Status == 200 && ok(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: condition not reached in %s; last %d %s", path, within, r.Status, r.Raw)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// mountSmallTmpfs mounts a tmpfs of the given size on a temporary
// directory (root only; the test is skipped where mounting is not allowed).
func mountSmallTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		// The gateway (closed by an earlier cleanup) held files there.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes zeros to path until the file system is full.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zeros := make([]byte, 64<<10)
	for {
		if _, err := f.Write(zeros); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", path, err)
			}
			break
		}
	}
}
