// Package sandbox runs untrusted code (the run_python tool, skill tool
// scripts) under caps, confined to one work directory.
//
// One small interface, Executor, has one backend per folder:
// sandbox/process (a fresh bubblewrap jail and interpreter per call, the
// default), sandbox/pool (pre-forked warm interpreters, each jail used
// once), sandbox/ssh (the same call on a remote host, caps enforced there)
// and sandbox/docker (a container engine's API over its socket).
//
// The local confinement (Jail) is built on maintained mechanisms: Debian's
// bubblewrap for namespaces (user, mount, pid, ipc, uts, cgroup and network
// unless Caps.Network), a read-only root of /usr (+ the interpreter's
// prefix), a fresh /tmp and /proc of the jail's own pid namespace, the work
// directory bound read-write as /work (the only writable place the host
// sees), no environment of the gateway; rlimits (CPU, address space,
// processes, file size, open files, no core dumps) through prlimit(1); a
// cgroup per call (pids.max, memory limit) where the cgroup filesystem is
// writable; and a wall-time kill of the whole process group and cgroup.
// Detect reports which of these are in force; docs/sandbox.md has the
// model and what it does not contain.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Caps bound one execution (runtime.sandbox). Zero fields take the
// defaults of DefaultCaps.
type Caps struct {
	// WallTime: the execution is killed (whole process group and cgroup)
	// after this long.
	WallTime time.Duration `json:"wall_time"`
	// CPUTime: RLIMIT_CPU per process (SIGXCPU, then SIGKILL a second on).
	CPUTime time.Duration `json:"cpu_time"`
	// MemoryBytes: RLIMIT_AS per process, and the cgroup's memory limit.
	MemoryBytes int64 `json:"memory_bytes"`
	// Processes: the cgroup's pids.max (and RLIMIT_NPROC, which the kernel
	// does not apply to root).
	Processes int `json:"processes"`
	// OutputBytes: stdout and stderr each keep this many bytes; a run that
	// writes more than OutputKillFactor times this in all is stopped.
	OutputBytes int `json:"output_bytes"`
	// FileSizeBytes: RLIMIT_FSIZE, the largest file the code may write.
	FileSizeBytes int64 `json:"file_size_bytes"`
	// Network: false (the default) gives the jail its own network namespace
	// with nothing but a loopback of its own.
	Network bool `json:"network"`
}

// OutputKillFactor: output past OutputBytes is discarded; past this many
// times OutputBytes the run is stopped (CapOutput).
const OutputKillFactor = 16

// DefaultCaps are the documented defaults (docs/configuration.md).
func DefaultCaps() Caps {
	return Caps{
		WallTime:      30 * time.Second,
		CPUTime:       10 * time.Second,
		MemoryBytes:   512 << 20,
		Processes:     64,
		OutputBytes:   64 << 10,
		FileSizeBytes: 64 << 20,
	}
}

// WithDefaults fills the zero fields of c from DefaultCaps.
func (c Caps) WithDefaults() Caps { return c.Or(DefaultCaps()) }

// Or fills the zero (or negative) limits of c from d; Network is c's.
func (c Caps) Or(d Caps) Caps {
	if c.WallTime <= 0 {
		c.WallTime = d.WallTime
	}
	if c.CPUTime <= 0 {
		c.CPUTime = d.CPUTime
	}
	if c.MemoryBytes <= 0 {
		c.MemoryBytes = d.MemoryBytes
	}
	if c.Processes <= 0 {
		c.Processes = d.Processes
	}
	if c.OutputBytes <= 0 {
		c.OutputBytes = d.OutputBytes
	}
	if c.FileSizeBytes <= 0 {
		c.FileSizeBytes = d.FileSizeBytes
	}
	return c
}

// Cap names the cap an execution hit.
type Cap string

// The caps an execution can hit.
const (
	CapNone      Cap = ""
	CapWallTime  Cap = "wall_time"
	CapCPUTime   Cap = "cpu_time"
	CapMemory    Cap = "memory"
	CapProcesses Cap = "processes"
	CapOutput    Cap = "output"
	CapFileSize  Cap = "file_size"
)

// File is an input file written into the work directory before the run.
type File struct {
	// Path is relative to the work directory; absolute paths and ".."
	// escapes are refused (ErrInvalid).
	Path    string
	Content []byte
}

// Mount is an extra read-only bind of a host path (a skill's directory).
type Mount struct {
	Host, Sandbox string
}

// Request is one execution.
type Request struct {
	// Code is Python source run by the configured interpreter; or Argv.
	Code string
	// Argv runs a command instead (skill tool scripts); Argv[0] is a path
	// inside the jail (a Mount's file, or a tool on PATH).
	Argv []string
	// Stdin is the standard input of an Argv command (Code gets none).
	Stdin []byte
	// Dir is the host work directory, bound read-write as /work (the
	// jail's working directory). Created if missing.
	Dir string
	// Files are written into Dir before the run.
	Files []File
	// Mounts are extra read-only binds.
	Mounts []Mount
	// Env is added to the jail's small fixed environment.
	Env map[string]string
	// Tools are host commands put on the jail's PATH (a subset of
	// runtime.system_tools); nothing else is on it.
	Tools []string
	// Caps bound the run (zero fields: the executor's caps).
	Caps Caps
}

// Result is what an execution did.
type Result struct {
	Stdout          string        `json:"stdout"`
	Stderr          string        `json:"stderr"`
	StdoutTruncated bool          `json:"stdout_truncated,omitempty"`
	StderrTruncated bool          `json:"stderr_truncated,omitempty"`
	ExitCode        int           `json:"exit_code"`
	Signal          string        `json:"signal,omitempty"`
	CapHit          Cap           `json:"cap_hit,omitempty"`
	Duration        time.Duration `json:"duration"`
	// Files are the regular files the run created or changed in Dir,
	// relative to it (symlinks and other non-regular files are never
	// listed, so nothing outside Dir is reached through them).
	Files []string `json:"files,omitempty"`
}

// Executor runs one Request at a time per call; implementations are safe
// for concurrent use.
type Executor interface {
	// Name is the backend (process, pool, ssh, docker).
	Name() string
	// Run executes req. Problems of the code itself (exit status, caps)
	// are in the Result; an error is a problem of the request (ErrInvalid),
	// of the executor (ErrUnavailable) or ctx's end.
	Run(ctx context.Context, req Request) (Result, error)
	// Isolation says what confinement is in force.
	Isolation() Isolation
	// Close releases the executor (a pool's warm interpreters).
	Close() error
}

// Errors of Run.
var (
	// ErrInvalid: the request is bad (empty or non-UTF-8 code, a path
	// escape, code too large).
	ErrInvalid = errors.New("invalid request")
	// ErrUnavailable: the executor cannot run code (no interpreter, no
	// isolation and allow_unconfined not set, engine unreachable).
	ErrUnavailable = errors.New("executor unavailable")
)

// MaxCodeBytes bounds Request.Code.
const MaxCodeBytes = 1 << 20

// MaxInputBytes bounds the Files of one request in all.
const MaxInputBytes = 32 << 20

// Isolation is the confinement an executor applies, for /health and
// `agentry doctor`.
type Isolation struct {
	Backend string `json:"backend"`
	// Confined: filesystem, process and (unless network) network isolation
	// are in force. False means code runs unconfined (only with
	// allow_unconfined) or not at all.
	Confined bool `json:"confined"`
	// Mechanisms in force, e.g. "bubblewrap (user,mount,pid,ipc,uts,net namespaces)",
	// "rlimits", "cgroup v1 (pids, memory)".
	Mechanisms []string `json:"mechanisms"`
	// Missing are mechanisms looked for and not available, with why.
	Missing []string `json:"missing,omitempty"`
	// Interpreter is the resolved Python interpreter (or the problem).
	Interpreter string `json:"interpreter,omitempty"`
	// Refuses: run_python is refused here (why).
	Refuses string `json:"refuses,omitempty"`
}

// Summary is one line for doctor and /health.
func (i Isolation) Summary() string {
	if i.Refuses != "" {
		return i.Backend + ": refused: " + i.Refuses
	}
	s := i.Backend + ": " + strings.Join(i.Mechanisms, ", ")
	if !i.Confined {
		s += " (UNCONFINED)"
	}
	return s
}

// Validate checks a request's code and files before anything runs.
func Validate(req Request) error {
	if req.Argv == nil {
		if strings.TrimSpace(req.Code) == "" {
			return fmt.Errorf("%w: code is empty", ErrInvalid)
		}
		if len(req.Code) > MaxCodeBytes {
			return fmt.Errorf("%w: code is %d bytes; at most %d", ErrInvalid, len(req.Code), MaxCodeBytes)
		}
		if !utf8Valid(req.Code) {
			return fmt.Errorf("%w: code is not valid UTF-8", ErrInvalid)
		}
		if strings.ContainsRune(req.Code, 0) {
			return fmt.Errorf("%w: code contains a NUL byte", ErrInvalid)
		}
	}
	total := 0
	for _, f := range req.Files {
		if _, err := ConfinedRel(f.Path); err != nil {
			return err
		}
		total += len(f.Content)
	}
	if total > MaxInputBytes {
		return fmt.Errorf("%w: files are %d bytes in all; at most %d", ErrInvalid, total, MaxInputBytes)
	}
	if req.Dir == "" {
		return fmt.Errorf("%w: no work directory", ErrInvalid)
	}
	return nil
}

// ConfinedRel cleans a relative path, refusing absolute paths and escapes.
func ConfinedRel(rel string) (string, error) {
	if rel == "" {
		return "", fmt.Errorf("%w: a file path is empty", ErrInvalid)
	}
	if filepath.IsAbs(rel) || strings.HasPrefix(rel, "/") {
		return "", fmt.Errorf("%w: file path %q must be relative to the work directory", ErrInvalid, rel)
	}
	clean := filepath.Clean(rel)
	if clean == "." || clean == ".." || strings.HasPrefix(clean, "../") || strings.ContainsRune(rel, 0) {
		return "", fmt.Errorf("%w: file path %q leaves the work directory", ErrInvalid, rel)
	}
	return clean, nil
}

// WriteFiles writes files into dir, refusing to follow symlinks out of it.
func WriteFiles(dir string, files []File) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	defer root.Close()
	for _, f := range files {
		rel, err := ConfinedRel(f.Path)
		if err != nil {
			return err
		}
		if d := filepath.Dir(rel); d != "." {
			if err := root.MkdirAll(d, 0o755); err != nil {
				return fmt.Errorf("%w: file %q: %v", ErrInvalid, f.Path, err)
			}
		}
		if err := root.WriteFile(rel, f.Content, 0o644); err != nil {
			return fmt.Errorf("%w: file %q: %v", ErrInvalid, f.Path, err)
		}
	}
	return nil
}

// Snapshot is the regular files of a directory with their size and mtime.
type Snapshot map[string]fileStamp

type fileStamp struct {
	size  int64
	mtime time.Time
}

// maxSnapshotFiles bounds a snapshot's walk.
const maxSnapshotFiles = 10000

// Snap records dir's regular files (symlinks are not followed).
func Snap(dir string) Snapshot {
	s := Snapshot{}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || len(s) >= maxSnapshotFiles {
			return filepath.SkipDir
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		s[rel] = fileStamp{info.Size(), info.ModTime()}
		return nil
	})
	return s
}

// Changed lists the regular files of dir that are new or changed since s.
func (s Snapshot) Changed(dir string) []string {
	var out []string
	for rel, st := range Snap(dir) {
		if old, ok := s[rel]; !ok || old != st {
			out = append(out, rel)
		}
	}
	sortStrings(out)
	return out
}
