package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/process"
	"github.com/agentryhq/agentry/internal/sandbox/sandboxtest"
)

func newJail(t *testing.T, caps sandbox.Caps) *sandbox.Jail {
	t.Helper()
	j := sandbox.NewJail(sandbox.JailConfig{SystemTools: []string{"ls"}, Caps: caps})
	if iso := j.Isolation(); !iso.Confined || iso.Refuses != "" {
		t.Fatalf("no isolation on this host (install bubblewrap): %+v", iso)
	}
	return j
}

func runner(e sandbox.Executor) sandboxtest.Runner {
	return func(ctx context.Context, code, dir string, caps sandbox.Caps) (sandbox.Result, error) {
		return e.Run(ctx, sandbox.Request{Code: code, Dir: dir, Tools: []string{"ls"}, Caps: caps})
	}
}

func TestProcessEscapeSuite(t *testing.T) {
	sandboxtest.Escape(t, runner(process.New(newJail(t, sandbox.Caps{}))))
}

func TestProcessOrdinaryCode(t *testing.T) {
	sandboxtest.Ordinary(t, runner(process.New(newJail(t, sandbox.Caps{}))))
}

func TestIsolationReported(t *testing.T) {
	iso := newJail(t, sandbox.Caps{}).Isolation()
	s := iso.Summary()
	for _, want := range []string{"bubblewrap", "rlimits"} {
		if !strings.Contains(s, want) {
			t.Fatalf("summary %q lacks %q", s, want)
		}
	}
	if iso.Interpreter == "" || !filepath.IsAbs(iso.Interpreter) {
		t.Fatalf("interpreter %q", iso.Interpreter)
	}
}

func TestBadInput(t *testing.T) {
	e := process.New(newJail(t, sandbox.Caps{}))
	dir := t.TempDir()
	ctx := context.Background()
	for name, req := range map[string]sandbox.Request{
		"not UTF-8":     {Code: "print('\xff\xfe')", Dir: dir},
		"empty":         {Code: "  \n", Dir: dir},
		"1 MB and more": {Code: "#" + strings.Repeat("x", sandbox.MaxCodeBytes), Dir: dir},
		"absolute file": {Code: "print(1)", Dir: dir, Files: []sandbox.File{{Path: "/etc/x", Content: []byte("x")}}},
		"escaping file": {Code: "print(1)", Dir: dir, Files: []sandbox.File{{Path: "a/../../x", Content: []byte("x")}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := e.Run(ctx, req)
			if !errors.Is(err, sandbox.ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "x")); err == nil {
		t.Fatal("an escaping file was written")
	}
	t.Run("symlinked input file", func(t *testing.T) {
		outside := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
			t.Fatal(err)
		}
		_, err := e.Run(ctx, sandbox.Request{Code: "print(1)", Dir: dir, Files: []sandbox.File{{Path: "link/x", Content: []byte("x")}}})
		if !errors.Is(err, sandbox.ErrInvalid) {
			t.Fatalf("want ErrInvalid, got %v", err)
		}
		if _, err := os.Stat(filepath.Join(outside, "x")); err == nil {
			t.Fatal("written through a symlink")
		}
	})
	t.Run("missing interpreter", func(t *testing.T) {
		j := sandbox.NewJail(sandbox.JailConfig{PythonPath: "/nonexistent/python9"})
		_, err := process.New(j).Run(ctx, sandbox.Request{Code: "print(1)", Dir: dir})
		if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "runtime.python_path") {
			t.Fatalf("want ErrUnavailable naming runtime.python_path, got %v", err)
		}
	})
	t.Run("a tool not in system_tools", func(t *testing.T) {
		_, err := e.Run(ctx, sandbox.Request{Code: "print(1)", Dir: dir, Tools: []string{"curl"}})
		if !errors.Is(err, sandbox.ErrUnavailable) {
			t.Fatalf("want ErrUnavailable, got %v", err)
		}
	})
}

func TestInputFilesAndExit(t *testing.T) {
	e := process.New(newJail(t, sandbox.Caps{}))
	dir := t.TempDir()
	res, err := e.Run(context.Background(), sandbox.Request{Code: "import sys\nprint(open('in/a.txt').read())\nprint('oops', file=sys.stderr)\nsys.exit(3)", Dir: dir,
		Files: []sandbox.File{{Path: "in/a.txt", Content: []byte("hello")}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || strings.TrimSpace(res.Stdout) != "hello" || strings.TrimSpace(res.Stderr) != "oops" || res.CapHit != "" {
		t.Fatalf("%+v", res)
	}
}

func TestUnconfinedRefusedWithoutConsent(t *testing.T) {
	t.Setenv("PATH", "/nonexistent") // no bwrap, no prlimit
	py, err := filepath.EvalSymlinks("/usr/bin/python3")
	if err != nil {
		t.Skip("no /usr/bin/python3")
	}
	j := sandbox.NewJail(sandbox.JailConfig{PythonPath: py})
	if j.Isolation().Refuses == "" {
		t.Fatalf("want refusal without bubblewrap: %+v", j.Isolation())
	}
	_, err = j.Run(context.Background(), sandbox.Request{Code: "print(1)", Dir: t.TempDir()})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "allow_unconfined") {
		t.Fatalf("want refusal naming allow_unconfined, got %v", err)
	}
	j = sandbox.NewJail(sandbox.JailConfig{PythonPath: py, AllowUnconfined: true})
	res, err := j.Run(context.Background(), sandbox.Request{Code: "print(6*7)", Dir: t.TempDir()})
	if err != nil || strings.TrimSpace(res.Stdout) != "42" {
		t.Fatalf("unconfined run: %+v %v", res, err)
	}
	if !strings.Contains(j.Isolation().Summary(), "UNCONFINED") {
		t.Fatalf("summary %q", j.Isolation().Summary())
	}
}
