package audit

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/scrub"
)

func TestDisabledWritesNothing(t *testing.T) {
	l, err := Open(config.AuditLogConfig{}, t.TempDir(), nil)
	if err != nil || l != nil {
		t.Fatalf("disabled: %v %v", l, err)
	}
	l.Write(Entry{Outcome: "ok"}) // a nil log is a no-op
	if lines, err := l.Tail(10); err != nil || len(lines) != 0 {
		t.Fatalf("tail of nil: %v %v", lines, err)
	}
}

// TestRotatesBySizeAndTailsAcrossFiles: with a 1 MB limit the file rotates,
// at most max_files rotated files stay, every line is whole JSON and Tail
// reads back across the rotation, oldest first.
func TestRotatesBySizeAndTailsAcrossFiles(t *testing.T) {
	dir := t.TempDir()
	l, err := Open(config.AuditLogConfig{Enabled: true, File: "audit.log", MaxSizeMB: 1, MaxFiles: 2}, dir, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	route := "/api/v1/workboard/tasks/:id/run" + strings.Repeat("x", 400)
	const n = 8000 // ~3.7 MB of lines: rotates three times
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n/4; i++ {
				l.Write(Entry{Kind: KindAPI, Subject: "admin", Method: "POST", Route: route, Outcome: "ok", Status: 202})
			}
		}()
	}
	wg.Wait()
	files, _ := filepath.Glob(filepath.Join(dir, "audit.log*"))
	if len(files) != 3 {
		t.Fatalf("files %v, want audit.log, .1, .2", files)
	}
	if _, err := os.Stat(filepath.Join(dir, "audit.log.3")); err == nil {
		t.Fatal("more rotated files than max_files")
	}
	for _, f := range files {
		st, _ := os.Stat(f)
		if st.Size() > 1<<20 {
			t.Fatalf("%s is %d bytes, over the limit", f, st.Size())
		}
		raw, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var e Entry
			if err := json.Unmarshal([]byte(line), &e); err != nil || e.Outcome != "ok" || e.Time.IsZero() {
				t.Fatalf("%s: bad line %q: %v", f, line, err)
			}
		}
	}
	cur, _ := os.ReadFile(filepath.Join(dir, "audit.log"))
	inCurrent := strings.Count(string(cur), "\n")
	lines, err := l.Tail(inCurrent + 10)
	if err != nil || len(lines) != inCurrent+10 {
		t.Fatalf("tail: %d lines, %v", len(lines), err)
	}
	for _, line := range lines {
		if !json.Valid([]byte(line)) {
			t.Fatalf("tail line %q", line)
		}
	}
}

// TestEntriesAreScrubbed: a registered secret or a credential-like token
// in a route parameter or subject never reaches the audit file.
func TestEntriesAreScrubbed(t *testing.T) {
	const secret = "audit-registered-secret-0123456789"
	src := scrub.Register("audit-test")
	src.Set(secret)
	defer src.Close()
	dir := t.TempDir()
	l, err := Open(config.AuditLogConfig{Enabled: true, File: "audit.log"}, dir, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Write(Entry{Kind: KindDecision, Subject: "key:" + secret, Method: "POST", Route: "/api/v1/webhooks/:agent_id", Outcome: "denied", Status: 401,
		Targets: map[string]string{"agent_id": secret, "token": "sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123"}})
	raw, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), secret) || strings.Contains(string(raw), "abcdefghijklmnopqrstuvwxyz") {
		t.Fatalf("a secret reached the audit log: %s", raw)
	}
	var e Entry
	if err := json.Unmarshal(raw, &e); err != nil || e.Route != "/api/v1/webhooks/:agent_id" || e.Status != 401 || e.Targets["agent_id"] == "" {
		t.Fatalf("entry %+v %v", e, err)
	}
}
