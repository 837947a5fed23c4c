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
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// ClientVersion is the version the agentry client binary is built with
// (update checks in the tests compare against it).
const ClientVersion = "1.0.0"

// binDirPrefix names the folders the binaries are built into, one per test
// process (concurrent test runs must not overwrite each other's binaries).
const binDirPrefix = "agentry-e2e-bin-"

// Binary builds ./cmd/agentryd and ./cmd/agentry once per test process and
// returns the path of one of them (name "agentryd" or "agentry"); both live
// in the same folder.
//
// Both are built without the race detector, whatever the test binary: the
// gateway embeds the Temporal server, which is slow under -race (see the
// Makefile), and every link of the 240 MB gateway costs half a minute of
// CPU, so there is one build of each per run, shared by every test. The
// folder cannot be removed when the process ends (TestMain belongs to the
// package), so each run removes the folders of test processes that are gone.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStaleBinDirs()
		buildDir = filepath.Join(os.TempDir(), fmt.Sprintf("%s%d", binDirPrefix, os.Getpid()))
		if buildErr = os.MkdirAll(buildDir, 0o755); buildErr != nil {
			return
		}
		root := moduleRoot()
		for _, b := range []struct{ name, version string }{{"agentryd", "e2e"}, {"agentry", ClientVersion}} {
			if buildErr = GoBuild(root, filepath.Join(buildDir, b.name), "./cmd/"+b.name, "-X main.version="+b.version); buildErr != nil {
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(buildDir, name)
}

// GoBuild runs go build -o out pkg in root with ldflags.
func GoBuild(root, out, pkg, ldflags string) error {
	args := []string{"build"}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	args = append(args, "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

func removeStaleBinDirs() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		pidText, ok := strings.CutPrefix(e.Name(), binDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		var pid int
		if _, err := fmt.Sscan(pidText, &pid); err != nil || pid <= 0 {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
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
	p, err := Launch(bin, t.TempDir(), env, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}

// Launch runs bin with args and env (added to a minimal environment: PATH
// and HOME=home). The caller ends it (Stop or Crash); StartProcess is the
// form for tests.
func Launch(bin, home string, env map[string]string, args ...string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out := &SafeBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &Process{Cmd: cmd, Output: out}, nil
}

// Stop kills the process if it still runs and waits for it.
func (p *Process) Stop() {
	if p.Cmd.ProcessState == nil {
		p.Cmd.Process.Kill()
		p.Cmd.Wait()
	}
}

// WaitHTTP polls url until it answers 200 or the timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration, p *Process) {
	t.Helper()
	if err := WaitReady(url, timeout, p); err != nil {
		t.Fatal(err)
	}
}

// WaitReady polls url until it answers 200; the error (timeout, or p
// exited) carries p's output.
func WaitReady(url string, timeout time.Duration, p *Process) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if p != nil && p.Cmd.ProcessState != nil {
			return fmt.Errorf("process exited while waiting for %s:\n%s", url, p.Output.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := ""
	if p != nil {
		out = p.Output.String()
	}
	return fmt.Errorf("%s did not answer 200 within %s\n%s", url, timeout, out)
}

// FreePorts returns n distinct free loopback ports.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports, err := PickFreePorts(n)
	if err != nil {
		t.Fatal(err)
	}
	return ports
}

// PickFreePorts returns n distinct free loopback ports (FreePorts outside
// a test).
func PickFreePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Kill ends the process with SIGKILL (a crash: no shutdown code runs) and
// waits until it is gone.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if err := p.Crash(); err != nil {
		t.Fatal(err)
	}
}

// Crash is Kill outside a test.
func (p *Process) Crash() error {
	if err := p.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	p.Cmd.Wait()
	return nil
}

// Contains reports whether the output has s (helper for readable asserts).
func (p *Process) Contains(s string) bool { return strings.Contains(p.Output.String(), s) }
