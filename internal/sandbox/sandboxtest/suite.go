// Package sandboxtest is the escape suite and the ordinary-code suite every
// executor (and a skill's tool script) is run against. Tests only.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/sandbox"
)

// Runner runs Python code with dir as its work directory and caps.
type Runner func(ctx context.Context, code, dir string, caps sandbox.Caps) (sandbox.Result, error)

// Workspace is a fake gateway workspace: credentials, config, database,
// another run's directory, and the run directory under runs/.
type Workspace struct {
	Root, RunDir, OtherRun string
	Secret                 string
}

// NewWorkspace lays one out under t.TempDir().
func NewWorkspace(t *testing.T) Workspace {
	t.Helper()
	root := t.TempDir()
	w := Workspace{Root: root, RunDir: filepath.Join(root, "runs", "7"), OtherRun: filepath.Join(root, "runs", "6"), Secret: "sk-agentry-" + Marker()}
	for path, content := range map[string]string{
		"credentials/api_key":  w.Secret,
		"config.yaml":          "server:\n  api_key: " + w.Secret + "\n",
		"agentry.db":           "SQLite format 3\x00" + w.Secret,
		"runs/6/other-run.txt": w.Secret,
	} {
		p := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(w.RunDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return w
}

// Marker is a random token.
func Marker() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// SmallCaps keep the bombs quick.
func SmallCaps() sandbox.Caps {
	return sandbox.Caps{WallTime: 8 * time.Second, CPUTime: 3 * time.Second, MemoryBytes: 256 << 20, Processes: 32, OutputBytes: 16 << 10, FileSizeBytes: 8 << 20}
}

// Escape runs the escape suite: each attempt is contained, the secret
// never shows, nothing is written outside the run directory and no
// process of the attempt outlives its call.
func Escape(t *testing.T, run Runner) {
	ws := NewWorkspace(t)
	os.Setenv("AGENTRY_SUITE_SECRET", ws.Secret)
	defer os.Unsetenv("AGENTRY_SUITE_SECRET")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- struct{}{}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	type attempt struct {
		name  string
		code  string
		check func(t *testing.T, res sandbox.Result)
	}
	noSecret := func(t *testing.T, res sandbox.Result) {
		t.Helper()
		if strings.Contains(res.Stdout+res.Stderr, ws.Secret) {
			t.Fatalf("the secret leaked:\nstdout: %s\nstderr: %s", res.Stdout, res.Stderr)
		}
	}
	printsBlocked := func(t *testing.T, res sandbox.Result) {
		t.Helper()
		noSecret(t, res)
		if !strings.Contains(res.Stdout, "BLOCKED") || strings.Contains(res.Stdout, "OPENED") {
			t.Fatalf("want every attempt blocked, got stdout %q stderr %q", res.Stdout, res.Stderr)
		}
	}
	tryRead := func(paths ...string) string {
		var b strings.Builder
		b.WriteString("import os\n")
		for _, p := range paths {
			fmt.Fprintf(&b, "try:\n    print('OPENED', open(%q).read())\nexcept Exception as e:\n    print('BLOCKED', %q, type(e).__name__)\n", p, p)
		}
		return b.String()
	}
	rel, _ := filepath.Rel(ws.RunDir, filepath.Join(ws.Root, "credentials", "api_key"))
	comm := Marker()[:8]
	commLine := fmt.Sprintf("open('/proc/self/comm','w').write('sbx%s')\n", comm)
	attempts := []attempt{
		{"read credentials/api_key", tryRead(filepath.Join(ws.Root, "credentials", "api_key"), rel, "/work/"+rel), printsBlocked},
		{"read config and database", tryRead(filepath.Join(ws.Root, "config.yaml"), filepath.Join(ws.Root, "agentry.db"), filepath.Join(ws.OtherRun, "other-run.txt")), printsBlocked},
		{"read /etc/shadow", tryRead("/etc/shadow", "/etc/passwd"), printsBlocked},
		{"environment of the gateway", "import os\nprint('BLOCKED' if not any('AGENTRY' in k for k in os.environ) else 'OPENED', sorted(os.environ))\n", printsBlocked},
		{"host processes", fmt.Sprintf("import os\nprint('OPENED' if os.path.exists('/proc/%d/environ') else 'BLOCKED')\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]))\n", os.Getpid()), printsBlocked},
		{"write outside the run dir", fmt.Sprintf("import os\nfor p in [%q, %q, '/usr/x', '/etc/x', '/sbx/x']:\n    try:\n        open(p,'w').write('x'); print('OPENED', p)\n    except Exception as e:\n        print('BLOCKED', p, type(e).__name__)\n",
			filepath.Join(ws.Root, "escape.txt"), "../../escape2.txt"), func(t *testing.T, res sandbox.Result) {
			printsBlocked(t, res)
			for _, f := range []string{"escape.txt", "escape2.txt"} {
				if _, err := os.Stat(filepath.Join(ws.Root, f)); err == nil {
					t.Fatalf("%s was written outside the run directory", f)
				}
			}
		}},
		{"connect to a listener on loopback", fmt.Sprintf("import socket\nfor h in ['127.0.0.1', 'localhost', '::1']:\n    try:\n        socket.create_connection((h, %d), timeout=2); print('OPENED', h)\n    except Exception as e:\n        print('BLOCKED', h, type(e).__name__)\n", port), func(t *testing.T, res sandbox.Result) {
			printsBlocked(t, res)
			select {
			case <-accepted:
				t.Fatal("the listener accepted a connection from the sandbox")
			case <-time.After(100 * time.Millisecond):
			}
		}},
		{"fork bomb", commLine + "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n", func(t *testing.T, res sandbox.Result) {
			if res.CapHit != sandbox.CapProcesses && res.CapHit != sandbox.CapWallTime && res.CapHit != sandbox.CapCPUTime {
				t.Fatalf("fork bomb: cap %q, exit %d, stderr %s", res.CapHit, res.ExitCode, res.Stderr)
			}
		}},
		{"memory bomb", "x = []\nwhile True:\n    x.append(bytearray(16 << 20))\n", func(t *testing.T, res sandbox.Result) {
			if res.CapHit != sandbox.CapMemory {
				t.Fatalf("memory bomb: cap %q exit %d stderr %s", res.CapHit, res.ExitCode, res.Stderr)
			}
		}},
		{"infinite loop", "while True:\n    pass\n", func(t *testing.T, res sandbox.Result) {
			if res.CapHit != sandbox.CapCPUTime && res.CapHit != sandbox.CapWallTime {
				t.Fatalf("infinite loop: cap %q exit %d", res.CapHit, res.ExitCode)
			}
		}},
		{"sleep past the wall time", commLine + "import time, subprocess, os\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\ntime.sleep(1000)\n", func(t *testing.T, res sandbox.Result) {
			if res.CapHit != sandbox.CapWallTime {
				t.Fatalf("sleep: cap %q exit %d", res.CapHit, res.ExitCode)
			}
		}},
		{"1 GB of output", "import sys\nb = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(b)\n", func(t *testing.T, res sandbox.Result) {
			if res.CapHit != sandbox.CapOutput || !res.StdoutTruncated || len(res.Stdout) > 16<<10 {
				t.Fatalf("output: cap %q truncated %v len %d", res.CapHit, res.StdoutTruncated, len(res.Stdout))
			}
		}},
		{"a file past the size cap", "with open('big.bin', 'wb') as f:\n    f.write(b'x' * (64 << 20))\n", func(t *testing.T, res sandbox.Result) {
			if res.CapHit != sandbox.CapFileSize {
				t.Fatalf("file size: cap %q exit %d stderr %s", res.CapHit, res.ExitCode, res.Stderr)
			}
		}},
		{"a setuid binary", "import subprocess, os\nr = subprocess.run(['./suid-id', '-u'], capture_output=True, text=True)\nprint('uid', r.stdout.strip(), r.stderr.strip())\nprint('BLOCKED' if r.stdout.strip() != '0' else 'OPENED')\nfor p in ['/usr/bin/su', '/usr/bin/passwd', '/usr/bin/mount']:\n    if os.path.exists(p):\n        r = subprocess.run([p, '--help'], capture_output=True, text=True)\n", func(t *testing.T, res sandbox.Result) {
			printsBlocked(t, res)
		}},
		{"a symlink to a host file as an artifact", "import os\nos.symlink('/etc/passwd', 'leak.txt')\nos.symlink('" + filepath.Join(ws.Root, "credentials", "api_key") + "', 'key.txt')\nprint('BLOCKED')\n", func(t *testing.T, res sandbox.Result) {
			printsBlocked(t, res)
			for _, f := range res.Files {
				if f == "leak.txt" || f == "key.txt" {
					t.Fatalf("a symlink was reported as a produced file: %v", res.Files)
				}
			}
		}},
	}
	// The setuid binary: a root-owned setuid copy of id(1) in the run dir.
	if err := copyExec("/usr/bin/id", filepath.Join(ws.RunDir, "suid-id")); err != nil {
		t.Fatal(err)
	}
	for _, a := range attempts {
		t.Run(a.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			res, err := run(ctx, a.code, ws.RunDir, SmallCaps())
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			a.check(t, res)
			if n := livingAfter("sbx"+comm, time.Second); n > 0 {
				t.Fatalf("%d processes of the call outlived it", n)
			}
		})
	}
}

func copyExec(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Chmod(dst, 0o4755)
}

// ProcessesNamed counts host processes whose comm is name, zombies
// (dead, waiting to be reaped) left out.
func ProcessesNamed(name string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(b)) != name {
			continue
		}
		if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			// The state follows the parenthesised comm: "pid (comm) S ...".
			if i := strings.LastIndexByte(string(st), ')'); i > 0 && i+2 < len(st) && (st[i+2] == 'Z' || st[i+2] == 'X') {
				continue
			}
		}
		n++
	}
	return n
}

// livingAfter is ProcessesNamed once no process of that name is left, or
// after grace: a process SIGKILLed by the call's end may take a moment to
// leave the process table on a loaded machine (seen under load 16), which
// is not the same as outliving the call.
func livingAfter(name string, grace time.Duration) int {
	deadline := time.Now().Add(grace)
	for {
		n := ProcessesNamed(name)
		if n == 0 || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ordinary runs the ordinary-code suite: stdlib imports, sqlite3, a CSV
// artifact, a subprocess of an allowed tool (ls) and of one not allowed.
func Ordinary(t *testing.T, run Runner) {
	ws := NewWorkspace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := `import json, csv, sqlite3, math, re, datetime, subprocess, statistics, collections
db = sqlite3.connect('data.db')
db.execute('create table t (x int)')
db.executemany('insert into t values (?)', [(i,) for i in range(10)])
total = db.execute('select sum(x) from t').fetchone()[0]
db.commit()
db.close()
mem = sqlite3.connect(':memory:').execute('select 6*7').fetchone()[0]
with open('out.csv', 'w', newline='') as f:
    w = csv.writer(f)
    w.writerow(['n', 'sqrt'])
    for i in range(3):
        w.writerow([i, math.sqrt(i)])
ls = subprocess.run(['ls'], capture_output=True, text=True).stdout.split()
try:
    subprocess.run(['cat', 'out.csv'])
    cat = 'ran'
except FileNotFoundError:
    cat = 'not found'
print(json.dumps({'total': total, 'mem': mem, 're': bool(re.match(r'\d+', '42')), 'year': datetime.date(2026, 1, 2).year, 'ls': sorted(ls), 'cat': cat}))
`
	res, err := run(ctx, code, ws.RunDir, sandbox.Caps{})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"total": 45, "mem": 42, "re": true, "year": 2026, "ls": ["data.db", "out.csv"], "cat": "not found"}`
	if res.ExitCode != 0 || strings.TrimSpace(res.Stdout) != want {
		t.Fatalf("exit %d cap %q\nstdout: %s\nstderr: %s", res.ExitCode, res.CapHit, res.Stdout, res.Stderr)
	}
	if strings.Join(res.Files, ",") != "data.db,out.csv" {
		t.Fatalf("produced files %v", res.Files)
	}
	b, err := os.ReadFile(filepath.Join(ws.RunDir, "out.csv"))
	if err != nil || !strings.HasPrefix(string(b), "n,sqrt\r\n0,0.0") {
		t.Fatalf("out.csv: %q %v", b, err)
	}
}
