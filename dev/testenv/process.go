package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// readyTimeout bounds how long a server may take to accept connections.
	// Generous because the machine may be busy with parallel test binaries.
	readyTimeout = 60 * time.Second
	// stopTimeout bounds a graceful shutdown before the server is killed.
	stopTimeout = 15 * time.Second
	// portAttempts is how often a server is retried on a fresh port when the
	// chosen one was taken between FreePort and the server's bind.
	portAttempts = 3
)

// process is a server this test binary started and must stop.
type process struct {
	name    string // for messages: "PostgreSQL", "Redis"
	cmd     *exec.Cmd
	logPath string
	stopSig syscall.Signal // graceful shutdown signal
	dir     string         // temporary directory removed by stop, once owned

	exited  chan struct{} // closed when the process has exited
	waitErr error         // valid after exited is closed

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts cmd with stdout and stderr appended to logPath.
//
// deathSig is delivered to the server by the kernel if this test binary
// dies without running Main (a panic, a -timeout kill), so no server is ever
// orphaned. The kernel ties that signal to the OS thread that forked the
// child, not to the process, so the goroutine that starts the child stays
// locked to its thread until the child exits.
func startProcess(name string, cmd *exec.Cmd, logPath string, stopSig, deathSig syscall.Signal) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close() // the child holds its own descriptor
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = deathSig

	p := &process{name: name, cmd: cmd, logPath: logPath, stopSig: stopSig, exited: make(chan struct{})}
	startErr := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			startErr <- err
			return
		}
		startErr <- nil
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	if err := <-startErr; err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, cmd.Path, err)
	}
	return p, nil
}

// waitReady polls probe until it succeeds, the process exits or the
// timeout passes. Errors carry the tail of the server log.
func (p *process) waitReady(timeout time.Duration, probe func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := probe(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited during startup (%v)%s", p.name, p.waitErr, p.logTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s: %w%s", p.name, timeout, err, p.logTail())
		}
		select {
		case <-p.exited:
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// portConflict reports whether the server failed because its port was taken.
func (p *process) portConflict() bool {
	b, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(b), "Address already in use")
}

// stop shuts the server down gracefully, kills it after stopTimeout and
// removes its temporary directory. Safe to call more than once.
func (p *process) stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.exited:
		default:
			if err := p.cmd.Process.Signal(p.stopSig); err != nil && !errors.Is(err, os.ErrProcessDone) {
				p.stopErr = fmt.Errorf("signal %s: %w", p.name, err)
			}
			select {
			case <-p.exited:
			case <-time.After(stopTimeout):
				_ = p.cmd.Process.Kill()
				<-p.exited
				p.stopErr = fmt.Errorf("%s did not stop within %s and was killed%s", p.name, stopTimeout, p.logTail())
			}
		}
		if p.dir != "" {
			if err := os.RemoveAll(p.dir); err != nil {
				p.stopErr = errors.Join(p.stopErr, fmt.Errorf("remove %s directory: %w", p.name, err))
			}
		}
	})
	return p.stopErr
}

// logTail returns the end of the server log, formatted for an error message.
func (p *process) logTail() string {
	return fileTail(p.logPath, 4096)
}

func fileTail(path string, max int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > max {
		_, _ = f.Seek(-max, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("\n--- %s (tail) ---\n%s", path, strings.TrimRight(string(b), "\n"))
}

// serverEnv is the environment for server processes: the test's own, minus
// libpq variables that would redirect the tools, with messages forced to
// English so log checks such as portConflict work.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PG") || strings.HasPrefix(kv, "LC_") || strings.HasPrefix(kv, "LANG") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "LC_ALL=C")
}

// serverDirPrefix names the temporary directories of servers; ownerFile in
// each records the pid of the test binary that made it.
const (
	serverDirPrefix = "agentry-testenv-"
	ownerFile       = "owner.pid"
)

// makeServerDir creates a temporary directory for a server of kind, after
// removing directories left by test binaries that died without running
// Main (their servers were already killed through the parent-death signal).
func makeServerDir(kind string) (string, error) {
	sweepStaleServerDirs()
	dir, err := os.MkdirTemp("", serverDirPrefix+kind+"-")
	if err != nil {
		return "", fmt.Errorf("create %s directory: %w", kind, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("create %s directory: %w", kind, err)
	}
	return dir, nil
}

func sweepStaleServerDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), serverDirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // being created right now, or not ours to judge
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
