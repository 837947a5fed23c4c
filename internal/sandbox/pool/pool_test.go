package pool_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/pool"
	"github.com/agentryhq/agentry/internal/sandbox/sandboxtest"
)

func newPool(t *testing.T, size int) *pool.Executor {
	t.Helper()
	j := sandbox.NewJail(sandbox.JailConfig{SystemTools: []string{"ls"}})
	if iso := j.Isolation(); !iso.Confined {
		t.Fatalf("no isolation here (install bubblewrap): %+v", iso)
	}
	p, err := pool.New(j, size, []string{"ls"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func runner(e sandbox.Executor) sandboxtest.Runner {
	return func(ctx context.Context, code, dir string, caps sandbox.Caps) (sandbox.Result, error) {
		// Caps of its own would make the pool fall back to a fresh jail;
		// the suite's small caps are the pool's here.
		return e.Run(ctx, sandbox.Request{Code: code, Dir: dir})
	}
}

func smallPool(t *testing.T) *pool.Executor {
	t.Helper()
	j := sandbox.NewJail(sandbox.JailConfig{SystemTools: []string{"ls"}, Caps: sandboxtest.SmallCaps()})
	if !j.Isolation().Confined {
		t.Fatal("no isolation here")
	}
	p, err := pool.New(j, 2, []string{"ls"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func TestPoolEscapeSuite(t *testing.T) { sandboxtest.Escape(t, runner(smallPool(t))) }

func TestPoolOrdinaryCode(t *testing.T) { sandboxtest.Ordinary(t, runner(newPool(t, 2))) }

// Nothing of one call is visible to the next: not its files outside the
// run directory, not its modules, globals, environment or processes.
func TestPoolNothingCarriesOver(t *testing.T) {
	p := newPool(t, 1)
	ctx := context.Background()
	first := `import os, sys, threading, time
open('/tmp/left-behind', 'w').write('x')
os.environ['LEFT'] = '1'
sys.modules['json'].LEFT = 1
GLOBAL_LEFT = 1
import builtins; builtins.LEFT = 1
pid = os.fork()
if pid == 0:
    time.sleep(1000)
print('first', os.getpid())
`
	dirA, dirB := t.TempDir(), t.TempDir()
	res, err := p.Run(ctx, sandbox.Request{Code: first, Dir: dirA})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("first: %+v %v", res, err)
	}
	second := `import os, sys, json, builtins
print(os.path.exists('/tmp/left-behind'), 'LEFT' in os.environ, hasattr(json, 'LEFT'), 'GLOBAL_LEFT' in globals(), hasattr(builtins, 'LEFT'), sorted(os.listdir('.')))
print(len([p for p in os.listdir('/proc') if p.isdigit()]))
`
	for range 3 {
		if p.Warm() >= 1 {
			break
		}
		time.Sleep(time.Second)
	}
	res, err = p.Run(ctx, sandbox.Request{Code: second, Dir: dirB})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("second: %+v %v", res, err)
	}
	lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
	if lines[0] != "False False False False False []" {
		t.Fatalf("the second call saw the first: %q", res.Stdout)
	}
	// Its own pid namespace: the jail's init and the interpreter only.
	if lines[1] != "2" {
		t.Fatalf("processes visible in the second call: %s", lines[1])
	}
}

func TestPoolReplenishesAndCloses(t *testing.T) {
	p := newPool(t, 2)
	deadline := time.Now().Add(20 * time.Second)
	for p.Warm() < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if p.Warm() != 2 {
		t.Fatalf("warm %d", p.Warm())
	}
	for i := range 4 {
		res, err := p.Run(context.Background(), sandbox.Request{Code: "print(6*7)", Dir: t.TempDir()})
		if err != nil || strings.TrimSpace(res.Stdout) != "42" {
			t.Fatalf("call %d: %+v %v", i, res, err)
		}
	}
	for p.Warm() < 2 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	pids := p.Pids()
	if len(pids) != 2 {
		t.Fatalf("pids %v", pids)
	}
	p.Close()
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("warm jail %d outlived Close", pid)
		}
	}
	if _, err := p.Run(context.Background(), sandbox.Request{Code: "print(1)", Dir: t.TempDir()}); err == nil {
		t.Fatal("a closed pool ran code")
	}
}
