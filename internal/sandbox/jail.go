package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// JailConfig configures the local confinement.
type JailConfig struct {
	// PythonPath is runtime.python_path (default python3).
	PythonPath string
	// SystemTools are runtime.system_tools: host commands that may be put
	// on the jail's PATH.
	SystemTools []string
	// Caps are runtime.sandbox's caps.
	Caps Caps
	// AllowUnconfined lets code run without isolation where bubblewrap
	// does not work here (runtime.sandbox.allow_unconfined).
	AllowUnconfined bool
	// CgroupRoot overrides the cgroup filesystem's mount (tests).
	CgroupRoot string
}

// Jail runs commands confined on this host: bubblewrap + rlimits + a
// cgroup per call. Build one with NewJail; it is safe for concurrent use.
type Jail struct {
	cfg     JailConfig
	bwrap   string
	prlimit string
	python  interp
	pyErr   error
	tools   map[string]string // name -> resolved host path
	toolErr []string
	cg      cgroups
	iso     Isolation
}

type interp struct {
	exe   string   // the real executable
	binds []string // host prefixes to bind read-only (outside /usr)
}

// NewJail detects what this host offers and resolves the interpreter and
// system tools. It never fails: what is missing is in Isolation.
func NewJail(cfg JailConfig) *Jail {
	cfg.Caps = cfg.Caps.WithDefaults()
	if cfg.PythonPath == "" {
		cfg.PythonPath = "python3"
	}
	j := &Jail{cfg: cfg, tools: map[string]string{}}
	var mech, missing []string
	if p, err := exec.LookPath("bwrap"); err != nil {
		missing = append(missing, "bubblewrap: bwrap not found (apt-get install bubblewrap)")
	} else if out, err := probeBwrap(p); err != nil {
		missing = append(missing, "bubblewrap: "+out)
	} else {
		j.bwrap = p
		mech = append(mech, "bubblewrap (user, mount, pid, ipc, uts, cgroup, net namespaces; read-only /usr; no_new_privs)")
	}
	if p, err := exec.LookPath("prlimit"); err != nil {
		missing = append(missing, "rlimits: prlimit not found (util-linux)")
	} else {
		j.prlimit = p
		nproc := "nproc"
		if os.Geteuid() == 0 {
			nproc = "nproc (not applied to root: the cgroup's pids.max is the process cap)"
		}
		mech = append(mech, "rlimits (cpu, address space, fsize, nofile, core, "+nproc+")")
	}
	j.cg = detectCgroups(cfg.CgroupRoot)
	if j.cg.kind != "" {
		mech = append(mech, "cgroup "+j.cg.kind+" (pids.max, memory limit, kill on wall time)")
	} else {
		missing = append(missing, "cgroup: "+j.cg.why)
	}
	j.python, j.pyErr = resolvePython(cfg.PythonPath)
	for _, name := range cfg.SystemTools {
		p, err := exec.LookPath(name)
		if err == nil {
			p, err = filepath.EvalSymlinks(p)
		}
		if err != nil || strings.Contains(name, "/") {
			j.toolErr = append(j.toolErr, fmt.Sprintf("system tool %q not found on the host", name))
			continue
		}
		j.tools[name] = p
	}
	j.iso = Isolation{Backend: "process", Confined: j.bwrap != "", Mechanisms: mech, Missing: missing}
	if j.pyErr != nil {
		j.iso.Interpreter = j.pyErr.Error()
	} else {
		j.iso.Interpreter = j.python.exe
	}
	if j.bwrap == "" {
		if cfg.AllowUnconfined {
			j.iso.Mechanisms = append([]string{"none: code runs as a plain child process (runtime.sandbox.allow_unconfined)"}, j.iso.Mechanisms...)
		} else {
			j.iso.Refuses = "no working isolation (" + strings.Join(missing, "; ") + "); set runtime.sandbox.allow_unconfined: true to run code unconfined"
		}
	}
	return j
}

// Isolation is what this jail applies.
func (j *Jail) Isolation() Isolation { return j.iso }

// Caps are the jail's configured caps.
func (j *Jail) Caps() Caps { return j.cfg.Caps }

// ToolProblems lists system tools that could not be resolved.
func (j *Jail) ToolProblems() []string { return j.toolErr }

func probeBwrap(path string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []string{"--unshare-all", "--die-with-parent", "--ro-bind", "/usr", "/usr"}
	args = append(args, rootLinks()...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "/usr/bin/true")
	out, err := exec.CommandContext(ctx, path, args...).CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if msg == "" {
			msg = err.Error()
		}
		return "cannot create namespaces here: " + msg, err
	}
	return "", nil
}

// resolvePython finds the real interpreter behind path (shims such as
// pyenv's are followed by asking the interpreter) and the prefixes the
// jail must bind for it.
func resolvePython(path string) (interp, error) {
	p, err := exec.LookPath(path)
	if err != nil {
		return interp{}, fmt.Errorf("%w: interpreter %q (runtime.python_path) not found", ErrUnavailable, path)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, p, "-I", "-c", "import sys;print(sys.executable);print(sys.base_prefix);print(sys.prefix)")
	cmd.Env = os.Environ()
	out, err := cmd.Output()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if err != nil || len(lines) != 3 {
		return interp{}, fmt.Errorf("%w: interpreter %q (runtime.python_path) does not run: %v", ErrUnavailable, path, err)
	}
	exe, err := filepath.EvalSymlinks(lines[0])
	if err != nil {
		return interp{}, fmt.Errorf("%w: interpreter %q: %v", ErrUnavailable, path, err)
	}
	it := interp{exe: exe}
	for _, pre := range []string{filepath.Dir(filepath.Dir(exe)), lines[1], lines[2]} {
		if real, err := filepath.EvalSymlinks(pre); err == nil && !under(real, "/usr") && !slicesContains(it.binds, real) && real != "/" {
			it.binds = append(it.binds, real)
		}
	}
	return it, nil
}

func under(p, dir string) bool { return p == dir || strings.HasPrefix(p, dir+"/") }

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func sortStrings(s []string) { sort.Strings(s) }

func utf8Valid(s string) bool { return utf8.ValidString(s) }

// sandbox paths
const (
	sbxWork = "/work"
	sbxBin  = "/sbx/bin"
	sbxMain = "/sbx/main.py"
)

// ready checks the jail can run req at all.
func (j *Jail) ready(req Request) error {
	if j.iso.Refuses != "" {
		return fmt.Errorf("%w: %s", ErrUnavailable, j.iso.Refuses)
	}
	if req.Argv == nil && j.pyErr != nil {
		return j.pyErr
	}
	for _, t := range req.Tools {
		if _, ok := j.tools[t]; !ok {
			return fmt.Errorf("%w: command %q is not in runtime.system_tools (or not on the host)", ErrUnavailable, t)
		}
	}
	return nil
}

// argv builds the confined command line: prlimit ... bwrap ... -- inner.
func (j *Jail) argv(req Request, caps Caps, codeFile string, inner []string) []string {
	var a []string
	if j.prlimit != "" {
		cpu := int64(caps.CPUTime / time.Second)
		if cpu < 1 {
			cpu = 1
		}
		a = append(a, j.prlimit,
			fmt.Sprintf("--cpu=%d:%d", cpu, cpu+1),
			fmt.Sprintf("--as=%d", caps.MemoryBytes),
			fmt.Sprintf("--nproc=%d", caps.Processes),
			fmt.Sprintf("--fsize=%d", caps.FileSizeBytes),
			"--nofile=256", "--core=0", "--")
	}
	if j.bwrap == "" { // allow_unconfined
		return append(a, inner...)
	}
	a = append(a, j.bwrap, "--unshare-all")
	if caps.Network {
		a = append(a, "--share-net")
	}
	a = append(a, "--die-with-parent", "--new-session", "--clearenv",
		"--uid", "65534", "--gid", "65534", "--hostname", "sandbox",
		"--ro-bind", "/usr", "/usr")
	a = append(a, rootLinks()...)
	if caps.Network {
		for _, f := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates"} {
			if _, err := os.Stat(f); err == nil {
				a = append(a, "--ro-bind", f, f)
			}
		}
	}
	for _, b := range j.python.binds {
		a = append(a, "--ro-bind", b, b)
	}
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", req.Dir, sbxWork, "--chdir", sbxWork, "--dir", sbxBin)
	if codeFile != "" {
		a = append(a, "--ro-bind", codeFile, sbxMain)
	}
	for _, m := range req.Mounts {
		a = append(a, "--ro-bind", m.Host, m.Sandbox)
	}
	if j.python.exe != "" {
		// The interpreter is on PATH too (#!/usr/bin/env python3 scripts).
		a = append(a, "--symlink", j.python.exe, sbxBin+"/python3", "--symlink", j.python.exe, sbxBin+"/python")
	}
	for _, t := range req.Tools {
		a = append(a, "--ro-bind", j.tools[t], sbxBin+"/"+t)
	}
	a = append(a, "--remount-ro", "/")
	for _, kv := range j.env(req) {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return append(append(a, "--"), inner...)
}

// env is the jail's whole environment: nothing of the gateway's.
func (j *Jail) env(req Request) []string {
	env := []string{"PATH=" + sbxBin, "HOME=" + sbxWork, "TMPDIR=/tmp", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}
	if j.bwrap == "" { // unconfined: host paths
		env = []string{"PATH=" + j.unconfinedPath(req), "HOME=" + req.Dir, "TMPDIR=" + req.Dir, "LANG=C.UTF-8", "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"}
	}
	keys := make([]string, 0, len(req.Env))
	for k := range req.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+req.Env[k])
	}
	return env
}

func (j *Jail) unconfinedPath(req Request) string {
	var dirs []string
	for _, t := range req.Tools {
		if d := filepath.Dir(j.tools[t]); !slicesContains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return strings.Join(dirs, ":")
}

// pythonArgv is the interpreter's command line for a code file.
func (j *Jail) pythonArgv(file string) []string {
	return []string{j.python.exe, "-I", "-B", "-u", file}
}

// Run executes req in a fresh jail and waits for it.
func (j *Jail) Run(ctx context.Context, req Request) (Result, error) {
	if err := Validate(req); err != nil {
		return Result{}, err
	}
	if err := j.ready(req); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(req.Dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("work directory: %w", err)
	}
	if err := WriteFiles(req.Dir, req.Files); err != nil {
		return Result{}, err
	}
	caps := j.capsFor(req)
	var inner []string
	var stdin []byte
	if req.Argv != nil {
		inner, stdin = req.Argv, req.Stdin
	} else {
		f, err := os.CreateTemp("", "agentry-code-*.py")
		if err != nil {
			return Result{}, fmt.Errorf("%w: code file: %v", ErrUnavailable, err)
		}
		defer os.Remove(f.Name())
		_, werr := f.WriteString(req.Code)
		if cerr := f.Close(); werr != nil || cerr != nil {
			return Result{}, fmt.Errorf("%w: code file: %v", ErrUnavailable, errors.Join(werr, cerr))
		}
		file := sbxMain
		if j.bwrap == "" {
			file = f.Name()
		}
		inner = j.pythonArgv(file)
		snap := Snap(req.Dir)
		p, err := j.Start(req, caps, f.Name(), inner, nil)
		if err != nil {
			return Result{}, err
		}
		res := p.Wait(ctx)
		res.Files = snap.Changed(req.Dir)
		return res, nil
	}
	snap := Snap(req.Dir)
	p, err := j.Start(req, caps, "", inner, stdin)
	if err != nil {
		return Result{}, err
	}
	res := p.Wait(ctx)
	res.Files = snap.Changed(req.Dir)
	return res, nil
}

func (j *Jail) capsFor(req Request) Caps {
	c := req.Caps.Or(j.cfg.Caps)
	c.Network = req.Caps.Network || j.cfg.Caps.Network
	return c
}

// Proc is a started jail.
type Proc struct {
	cmd     *exec.Cmd
	cg      *cgroup
	caps    Caps
	stdout  *capWriter
	stderr  *capWriter
	stdin   *os.File // the write end, for pools (nil otherwise)
	start   time.Time
	killed  chan Cap
	once    sync.Once
	waitErr chan error
}

// Start starts inner confined, without waiting. stdin, when not nil, is
// written to the jail's standard input; a nil stdin with keepStdin (pools)
// leaves a pipe open for Feed.
func (j *Jail) Start(req Request, caps Caps, codeFile string, inner []string, stdin []byte) (*Proc, error) {
	return j.start(req, caps, codeFile, inner, stdin, false)
}

// StartWarm starts inner with its stdin kept open for Proc.Feed (pools).
func (j *Jail) StartWarm(req Request, caps Caps, inner []string) (*Proc, error) {
	return j.start(req, caps, "", inner, nil, true)
}

// PythonArgv is the interpreter's argv with extra arguments (pools).
func (j *Jail) PythonArgv(args ...string) ([]string, error) {
	if j.pyErr != nil {
		return nil, j.pyErr
	}
	return append([]string{j.python.exe, "-I", "-B", "-u"}, args...), nil
}

// Ready reports whether code can run (and why not).
func (j *Jail) Ready(req Request) error { return j.ready(req) }

func (j *Jail) start(req Request, caps Caps, codeFile string, inner []string, stdin []byte, keepStdin bool) (*Proc, error) {
	p := &Proc{caps: caps, killed: make(chan Cap, 1), waitErr: make(chan error, 1)}
	args := j.argv(req, caps, codeFile, inner)
	var cgFiles []string
	if j.cg.kind != "" {
		cg, err := j.cg.create(caps)
		if err == nil {
			p.cg = cg
			cgFiles = cg.procFiles()
		}
	}
	// A tiny shell outside the jail joins the cgroup before exec'ing the
	// rest, so nothing of the jail ever runs outside it.
	script := `while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"`
	full := append([]string{"-c", script, "sh"}, cgFiles...)
	full = append(append(full, "--"), args...)
	cmd := exec.Command("/bin/sh", full...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if j.bwrap == "" {
		cmd.Env = j.env(req)
		cmd.Dir = req.Dir
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	killAt := int64(caps.OutputBytes) * OutputKillFactor
	var total int64
	var mu sync.Mutex
	over := func(n int) {
		mu.Lock()
		total += int64(n)
		t := total
		mu.Unlock()
		if t > killAt {
			p.kill(CapOutput)
		}
	}
	p.stdout = &capWriter{max: caps.OutputBytes, onWrite: over}
	p.stderr = &capWriter{max: caps.OutputBytes, onWrite: over}
	cmd.Stdout, cmd.Stderr = p.stdout, p.stderr
	if keepStdin {
		r, w, err := os.Pipe()
		if err != nil {
			p.cg.remove()
			return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		cmd.Stdin = r
		p.stdin = w
		defer r.Close()
	} else if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	p.cmd = cmd
	if err := cmd.Start(); err != nil {
		p.cg.remove()
		if p.stdin != nil {
			p.stdin.Close()
		}
		return nil, fmt.Errorf("%w: start sandbox: %v", ErrUnavailable, err)
	}
	p.start = time.Now()
	go func() { p.waitErr <- cmd.Wait() }()
	return p, nil
}

// Feed writes data to a warm jail's stdin and closes it; the wall time
// starts now.
func (p *Proc) Feed(data []byte) error {
	p.start = time.Now()
	if p.stdin == nil {
		return errors.New("not a warm sandbox")
	}
	_, err := p.stdin.Write(data)
	cerr := p.stdin.Close()
	return errors.Join(err, cerr)
}

// kill stops the whole jail: its process group and cgroup.
func (p *Proc) kill(why Cap) {
	p.once.Do(func() {
		p.killed <- why
		if p.cmd.Process != nil {
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
		p.cg.kill()
	})
}

// Kill stops the jail (a warm sandbox not used).
func (p *Proc) Kill() {
	p.kill(CapNone)
	<-p.waitErr
	p.waitErr <- nil
	p.cg.kill()
	p.cg.remove()
}

// Wait waits for the jail to end (killing it at the wall time or when ctx
// ends) and reports what it did. Nothing of the jail outlives Wait.
func (p *Proc) Wait(ctx context.Context) Result {
	timer := time.NewTimer(p.caps.WallTime - time.Since(p.start))
	defer timer.Stop()
	var err error
	select {
	case err = <-p.waitErr:
	case <-timer.C:
		p.kill(CapWallTime)
		err = <-p.waitErr
	case <-ctx.Done():
		p.kill(CapWallTime)
		err = <-p.waitErr
	}
	// Whatever the jail left (it cannot: pid namespace, die-with-parent)
	// goes with the cgroup.
	p.cg.kill()
	res := Result{Duration: time.Since(p.start)}
	res.Stdout, res.StdoutTruncated = p.stdout.String()
	res.Stderr, res.StderrTruncated = p.stderr.String()
	var why Cap
	select {
	case why = <-p.killed:
	default:
	}
	res.ExitCode = -1
	var ee *exec.ExitError
	if err == nil {
		res.ExitCode = 0
	} else if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = ws.Signal().String()
			res.ExitCode = 128 + int(ws.Signal())
		} else {
			res.ExitCode = ee.ExitCode()
		}
	}
	if res.ExitCode > 128 && res.Signal == "" && res.ExitCode < 128+65 {
		// bwrap reports the child's death by signal as 128+signal.
		res.Signal = syscall.Signal(res.ExitCode - 128).String()
	}
	switch {
	case why == CapWallTime && p.cg.hit() != CapNone:
		res.CapHit = p.cg.hit() // e.g. a fork bomb stopped at the wall time
	case why != CapNone:
		res.CapHit = why
	case res.ExitCode == 128+int(syscall.SIGXCPU):
		res.CapHit = CapCPUTime
	default:
		res.CapHit = p.cg.hit()
		if res.CapHit == CapNone {
			res.CapHit = stderrHint(res.Stderr)
		}
	}
	p.cg.remove()
	return res
}

// stderrHint recognises a cap from the interpreter's own report where no
// cgroup counted it (rlimits only).
func stderrHint(stderr string) Cap {
	switch {
	case strings.Contains(stderr, "MemoryError"):
		return CapMemory
	case strings.Contains(stderr, "File too large"):
		return CapFileSize
	case strings.Contains(stderr, "BlockingIOError: [Errno 11] Resource temporarily unavailable"):
		return CapProcesses
	}
	return CapNone
}

// capWriter keeps the first max bytes, counts the rest.
type capWriter struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	max     int
	cut     bool
	onWrite func(int)
}

func (c *capWriter) Write(p []byte) (int, error) {
	n := len(p)
	c.mu.Lock()
	if room := max(c.max-c.buf.Len(), 0); n > room {
		c.cut = true
		c.buf.Write(p[:room])
	} else {
		c.buf.Write(p)
	}
	c.mu.Unlock()
	if c.onWrite != nil {
		c.onWrite(n)
	}
	return n, nil
}

// String is the kept text, cut at a character boundary, and whether more
// was written.
func (c *capWriter) String() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf.Bytes()
	if c.cut {
		for len(b) > 0 && !utf8.Valid(b) && len(c.buf.Bytes())-len(b) < 4 {
			b = b[:len(b)-1]
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), c.cut
}

func newID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Pid is the jail's host pid (its outer process).
func (p *Proc) Pid() int {
	if p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// rootLinks recreates /bin, /lib ... as on the host: symlinks into /usr
// (merged /usr) or read-only binds.
func rootLinks() []string {
	var a []string
	for _, l := range []string{"bin", "sbin", "lib", "lib64", "lib32"} {
		if t, err := os.Readlink("/" + l); err == nil {
			a = append(a, "--symlink", t, "/"+l)
		} else if fi, err := os.Stat("/" + l); err == nil && fi.IsDir() {
			a = append(a, "--ro-bind", "/"+l, "/"+l)
		}
	}
	return a
}

// HasTool reports whether name is a resolved runtime.system_tools command.
func (j *Jail) HasTool(name string) bool { _, ok := j.tools[name]; return ok }
