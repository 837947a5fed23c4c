// Package pool is the pre-forked executor: Size warm interpreters wait,
// each in its own fresh jail (sandbox.Jail) with its own empty staging
// directory as /work. A call takes one, copies the run directory's regular
// files in, hands it the code on stdin, copies the files the code created
// or changed back into the run directory, and throws the jail and its
// staging directory away: nothing of one call is visible to the next. A
// spare is started at once to replace it.
//
// Calls a warm jail cannot serve as configured (a command instead of code,
// extra mounts or caps of their own, a run directory larger than
// MaxCopyBytes) run in a fresh jail like the process executor.
package pool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/agentryhq/agentry/internal/sandbox"
)

// MaxCopyBytes bounds the run directory copied into a warm jail.
const MaxCopyBytes = 256 << 20

// DefaultSize is executor.pool.size's default.
const DefaultSize = 4

// bootstrap runs in each warm interpreter: the stdlib modules ordinary code
// uses are imported ahead, then the code is read from stdin and run as
// __main__.
const bootstrap = `import sys, os, json, csv, re, math, datetime, sqlite3, subprocess, collections, itertools, functools, random, statistics, pathlib
def _agentry_run(sys=sys, compile=compile, exec=exec, list=list):
    src = sys.stdin.buffer.read()
    d = sys.modules['__main__'].__dict__
    for k in list(d):
        if k not in ('__name__', '__builtins__', '__spec__', '__loader__', '__package__'):
            del d[k]
    d['__file__'] = '/sbx/main.py'
    sys.argv = ['/sbx/main.py']
    exec(compile(src, '/sbx/main.py', 'exec'), d)
_agentry_run()
`

// Executor is a pool of warm jails.
type Executor struct {
	jail  *sandbox.Jail
	size  int
	tools []string
	root  string // staging directories live here

	mu     sync.Mutex
	ready  []*slot
	closed bool
	wg     sync.WaitGroup
	err    error // the last spawn failure
}

type slot struct {
	proc *sandbox.Proc
	dir  string
}

// New starts size warm jails (0: DefaultSize) for code that may call tools
// (runtime.system_tools).
func New(jail *sandbox.Jail, size int, tools []string) (*Executor, error) {
	if size <= 0 {
		size = DefaultSize
	}
	root, err := os.MkdirTemp("", "agentry-pool-")
	if err != nil {
		return nil, fmt.Errorf("pool staging: %w", err)
	}
	e := &Executor{jail: jail, size: size, tools: tools, root: root}
	if err := jail.Ready(sandbox.Request{Tools: tools}); err != nil {
		// Nothing can run: calls report it; no jail is started.
		e.err = err
		return e, nil
	}
	for range size {
		e.spawn()
	}
	return e, nil
}

// Name is "pool".
func (e *Executor) Name() string { return "pool" }

// Isolation is the jail's, with the pool's shape.
func (e *Executor) Isolation() sandbox.Isolation {
	iso := e.jail.Isolation()
	iso.Backend = "pool"
	iso.Mechanisms = append(iso.Mechanisms, fmt.Sprintf("%d warm interpreters, one fresh jail per call", e.size))
	return iso
}

// spawn starts one warm jail in the background.
func (e *Executor) spawn() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	e.wg.Add(1)
	e.mu.Unlock()
	go func() {
		defer e.wg.Done()
		s, err := e.start()
		e.mu.Lock()
		defer e.mu.Unlock()
		if err != nil {
			e.err = err
			return
		}
		if e.closed {
			go e.discard(s)
			return
		}
		e.ready = append(e.ready, s)
	}()
}

func (e *Executor) start() (*slot, error) {
	dir, err := os.MkdirTemp(e.root, "slot-")
	if err != nil {
		return nil, err
	}
	argv, err := e.jail.PythonArgv("-c", bootstrap)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	p, err := e.jail.StartWarm(sandbox.Request{Dir: dir, Tools: e.tools}, e.jail.Caps(), argv)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &slot{proc: p, dir: dir}, nil
}

func (e *Executor) discard(s *slot) {
	s.proc.Kill()
	os.RemoveAll(s.dir)
}

// take is a warm jail, or a new one when none is ready.
func (e *Executor) take() (*slot, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: the pool is closed", sandbox.ErrUnavailable)
	}
	var s *slot
	if n := len(e.ready); n > 0 {
		s, e.ready = e.ready[n-1], e.ready[:n-1]
	}
	e.mu.Unlock()
	e.spawn()
	if s != nil {
		return s, nil
	}
	return e.start()
}

// Warm is how many jails are ready (tests, figures).
func (e *Executor) Warm() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.ready)
}

// Pids are the host pids of the warm jails (figures: the pool's RSS).
func (e *Executor) Pids() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []int
	for _, s := range e.ready {
		out = append(out, s.proc.Pid())
	}
	return out
}

// Run executes req in a warm jail.
func (e *Executor) Run(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	if err := sandbox.Validate(req); err != nil {
		return sandbox.Result{}, err
	}
	if req.Argv != nil || len(req.Mounts) > 0 || req.Caps != (sandbox.Caps{}) || len(req.Env) > 0 || !sameTools(req.Tools, e.tools) {
		return e.jail.Run(ctx, req)
	}
	if err := e.jail.Ready(req); err != nil {
		return sandbox.Result{}, err
	}
	if err := os.MkdirAll(req.Dir, 0o755); err != nil {
		return sandbox.Result{}, fmt.Errorf("work directory: %w", err)
	}
	if err := sandbox.WriteFiles(req.Dir, req.Files); err != nil {
		return sandbox.Result{}, err
	}
	if size, ok := dirSize(req.Dir); !ok || size > MaxCopyBytes {
		return e.jail.Run(ctx, sandbox.Request{Code: req.Code, Dir: req.Dir, Tools: req.Tools})
	}
	s, err := e.take()
	if err != nil {
		return sandbox.Result{}, err
	}
	defer os.RemoveAll(s.dir)
	if err := copyTree(req.Dir, s.dir); err != nil {
		s.proc.Kill()
		return sandbox.Result{}, fmt.Errorf("%w: copy the run directory in: %v", sandbox.ErrUnavailable, err)
	}
	snap := sandbox.Snap(s.dir)
	if err := s.proc.Feed([]byte(req.Code)); err != nil && !errors.Is(err, os.ErrClosed) {
		// The interpreter may have died already; Wait tells.
		_ = err
	}
	res := s.proc.Wait(ctx)
	changed := snap.Changed(s.dir)
	var copied []string
	for _, rel := range changed {
		if err := copyOut(s.dir, req.Dir, rel); err == nil {
			copied = append(copied, rel)
		}
	}
	res.Files = copied
	return res, nil
}

func sameTools(a, b []string) bool {
	if a == nil {
		return true // run_python gets every system tool
	}
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Close kills the warm jails and removes their staging.
func (e *Executor) Close() error {
	e.mu.Lock()
	e.closed = true
	ready := e.ready
	e.ready = nil
	e.mu.Unlock()
	for _, s := range ready {
		e.discard(s)
	}
	e.wg.Wait()
	return os.RemoveAll(e.root)
}

// dirSize sums the regular files under dir (false when too many).
func dirSize(dir string) (int64, bool) {
	var total int64
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if n++; n > 10000 {
			return errors.New("too many files")
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total, err == nil
}

// copyTree copies the regular files and directories of src into dst
// (symlinks and devices are left out).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if rel == "." {
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type().IsRegular():
			return copyFile(p, target)
		}
		return nil
	})
}

// copyOut copies one regular file from the staging directory into the run
// directory, never following a symlink out of either.
func copyOut(staging, runDir, rel string) error {
	srcRoot, err := os.OpenRoot(staging)
	if err != nil {
		return err
	}
	defer srcRoot.Close()
	dstRoot, err := os.OpenRoot(runDir)
	if err != nil {
		return err
	}
	defer dstRoot.Close()
	info, err := srcRoot.Lstat(rel)
	if err != nil || !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", rel)
	}
	in, err := srcRoot.Open(rel)
	if err != nil {
		return err
	}
	defer in.Close()
	if d := filepath.Dir(rel); d != "." {
		if err := dstRoot.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if fi, err := dstRoot.Lstat(rel); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file in the run directory", rel)
	}
	out, err := dstRoot.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, info.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	mode := os.FileMode(0o644)
	if fi, err := in.Stat(); err == nil {
		mode = fi.Mode().Perm() // never setuid/setgid bits
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	return errors.Join(err, out.Close())
}
