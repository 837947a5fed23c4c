package skills

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/scrub"
)

// maxOutput bounds what a tool script's stdout and stderr keep.
const maxOutput = 256 << 10

// Runner runs skill tool scripts as child processes: the call's JSON
// arguments on stdin, stdout is the result. The child gets a small fixed
// environment (never the gateway's keys), a fresh working folder and
// SKILL_DIR; it runs in its own process group, killed whole at the timeout.
type Runner struct {
	Timeout time.Duration
	// Jail, when set, confines every run (the run_python sandbox:
	// sandboxed.go); nil keeps the plain child process above.
	Jail *sandbox.Jail
	// Caps bound a confined run (zero: the jail's, wall time Timeout).
	Caps sandbox.Caps
}

// Outcome is one run of a script.
type Outcome struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr,omitempty"`
	TimedOut bool   `json:"timed_out,omitempty"`
	// Error is a failure to start the script at all.
	Error      string `json:"error,omitempty"`
	DurationMS int64  `json:"duration_ms"`
	// NetworkIsolated: the run had no network (sandboxed dry runs where
	// user namespaces are available).
	NetworkIsolated bool `json:"network_isolated"`
	// Confinement is the sandbox the run had ("" when a plain child).
	Confinement string `json:"confinement,omitempty"`
	// CapHit names the sandbox cap the run hit.
	CapHit string `json:"cap_hit,omitempty"`
	// Sandbox is the confined run's full result (tests).
	Sandbox *sandbox.Result `json:"-"`
	timeout time.Duration
}

// Result is the outcome as the model reads it.
func (o Outcome) Result() Result {
	switch {
	case o.Error != "":
		return Result{Content: o.Error, IsError: true}
	case o.TimedOut:
		return Result{Content: fmt.Sprintf("the script did not finish within %s", o.timeout), IsError: true}
	case o.CapHit != "":
		msg := strings.TrimSpace(o.Stderr)
		return Result{Content: fmt.Sprintf("the script was stopped by the sandbox's %s cap (runtime.sandbox; exit status %d): %s", o.CapHit, o.ExitCode, msg), IsError: true}
	case o.ExitCode != 0:
		msg := strings.TrimSpace(o.Stderr)
		if msg == "" {
			msg = strings.TrimSpace(o.Stdout)
		}
		return Result{Content: fmt.Sprintf("exit status %d: %s", o.ExitCode, msg), IsError: true}
	}
	return Result{Content: o.Stdout}
}

var (
	netnsOnce sync.Once
	netnsOK   bool
)

// unshareAvailable probes once whether an unprivileged user + network
// namespace can be made here (unshare(1) and user namespaces enabled).
func unshareAvailable() bool {
	netnsOnce.Do(func() {
		path, err := exec.LookPath("unshare")
		if err != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		netnsOK = exec.CommandContext(ctx, path, "--user", "--map-root-user", "--net", "true").Run() == nil
	})
	return netnsOK
}

// Run runs script (relative to dir) with args on stdin. isolate asks for
// no network (the dry run); it is reported in the outcome, since it needs
// user namespaces.
func (r Runner) Run(ctx context.Context, dir, script string, args json.RawMessage, isolate bool) Outcome {
	if r.Jail != nil {
		return r.runConfined(ctx, dir, script, args, "", Permissions{})
	}
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	out := Outcome{timeout: timeout}
	work, err := os.MkdirTemp("", "agentry-skill-run-")
	if err != nil {
		out.Error = "cannot make a working folder: " + err.Error()
		return out
	}
	defer os.RemoveAll(work)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := filepath.Join(dir, filepath.FromSlash(script))
	name, argv := path, []string{}
	if isolate && unshareAvailable() {
		name, argv = "unshare", []string{"--user", "--map-root-user", "--net", "--", path}
		out.NetworkIsolated = true
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = work
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + work, "TMPDIR=" + work, "LANG=C.UTF-8", "SKILL_DIR=" + dir}
	if key := drivers.IdempotencyKey(ctx); key != "" {
		cmd.Env = append(cmd.Env, drivers.IdempotencyKeyEnv+"="+key)
	}
	cmd.Stdin = bytes.NewReader(args)
	stdout, stderr := &capped{max: maxOutput}, &capped{max: maxOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 2 * time.Second
	start := time.Now()
	err = cmd.Run()
	out.DurationMS = time.Since(start).Milliseconds()
	// A script is outside text: what it prints goes to the model, the stored
	// conversation and the install's dry-run report, so it is scrubbed here,
	// like an MCP server's answers (credential shapes included: a script's
	// output is no reply the model wrote).
	out.Stdout, out.Stderr = scrub.String(stdout.String()), scrub.String(stderr.String())
	var ee *exec.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		out.TimedOut, out.ExitCode = true, -1
	case errors.As(err, &ee):
		out.ExitCode = ee.ExitCode()
	case err != nil:
		out.Error = fmt.Sprintf("cannot run %s: %v", script, err)
		out.ExitCode = -1
	}
	return out
}

// capped keeps the first max bytes written and notes the rest was cut.
type capped struct {
	buf bytes.Buffer
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if room := max(c.max-c.buf.Len(), 0); n > room {
		c.cut, p = true, p[:room]
	}
	c.buf.Write(p)
	return n, nil
}

func (c *capped) String() string {
	if c.cut {
		return c.buf.String() + "\n[truncated]"
	}
	return c.buf.String()
}
