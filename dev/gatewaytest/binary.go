package gatewaytest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Binary builds ./cmd/<name> once per test binary (agentryd, agentry) and
// returns its path.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "agentry-bin-")
		if buildErr != nil {
			return
		}
		root := moduleRoot()
		for _, n := range []string{"agentryd", "agentry"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, n), "./cmd/"+n)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build ./cmd/%s: %v\n%s", n, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, name)
}

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Process is a binary running as a child process.
type Process struct {
	Cmd    *exec.Cmd
	Output *SafeBuffer
}

// SafeBuffer is a bytes.Buffer safe for concurrent writes and reads.
type SafeBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SafeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SafeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// StartProcess runs bin with args and env (added to a minimal environment).
// The process is killed when the test ends.
func StartProcess(t testing.TB, bin string, env map[string]string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, Output: out}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// WaitHTTP polls url until it answers 200 or the timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration, p *Process) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if p != nil && p.Cmd.ProcessState != nil {
			t.Fatalf("process exited while waiting for %s:\n%s", url, p.Output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := ""
	if p != nil {
		out = p.Output.String()
	}
	t.Fatalf("%s did not answer 200 within %s\n%s", url, timeout, out)
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// Contains reports whether the output has s (helper for readable asserts).
func (p *Process) Contains(s string) bool { return strings.Contains(p.Output.String(), s) }
