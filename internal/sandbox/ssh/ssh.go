// Package ssh is the executor that runs the call on a remote host over SSH
// (golang.org/x/crypto/ssh): key authentication only, the host key pinned
// (executor.ssh.host_key; any other key refuses the connection). The
// remote side (remote.py, sent with each call) enforces the caps there:
// bubblewrap when the remote host has it, rlimits, a cgroup v1 (pids,
// memory) when writable, and a wall-time kill. The run directory's files
// go over with the call and the files the code created or changed come
// back into it.
package ssh

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/agentryhq/agentry/internal/sandbox"
)

//go:embed remote.py
var remoteScript string

// MaxCopyBytes bounds the run directory sent with a call.
const MaxCopyBytes = 32 << 20

// Config is executor.ssh.
type Config struct {
	Address    string // host[:port]
	User       string
	KeyFile    string
	HostKey    string // authorized_keys form
	PythonPath string // remote interpreter (python3)
	Caps       sandbox.Caps
	Tools      []string
}

// Executor runs calls on one remote host over one SSH connection
// (re-dialled when it breaks).
type Executor struct {
	cfg    Config
	client *ssh.ClientConfig

	mu   sync.Mutex
	conn *ssh.Client
	mech []string
}

// New dials the host once to check the key and the pinned host key; a
// host that cannot be reached fails the start.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	if cfg.PythonPath == "" {
		cfg.PythonPath = "python3"
	}
	if !strings.Contains(cfg.Address, ":") {
		cfg.Address += ":22"
	}
	cfg.Caps = cfg.Caps.WithDefaults()
	pem, err := os.ReadFile(cfg.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("key_file: %w", err)
	}
	signer, err := ssh.ParsePrivateKey(pem)
	if err != nil {
		return nil, fmt.Errorf("key_file %s: %w (an unencrypted private key)", cfg.KeyFile, err)
	}
	pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(cfg.HostKey))
	if err != nil {
		return nil, fmt.Errorf("host_key: %w (authorized_keys form: \"ssh-ed25519 AAAA...\")", err)
	}
	e := &Executor{cfg: cfg, client: &ssh.ClientConfig{User: cfg.User, Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: ssh.FixedHostKey(pinned), HostKeyAlgorithms: []string{pinned.Type()}, Timeout: 10 * time.Second}}
	if _, err := e.connect(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Executor) connect(ctx context.Context) (*ssh.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		return e.conn, nil
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", e.cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: ssh %s: %v", sandbox.ErrUnavailable, e.cfg.Address, err)
	}
	c, chans, reqs, err := ssh.NewClientConn(nc, e.cfg.Address, e.client)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("%w: ssh %s: %v", sandbox.ErrUnavailable, e.cfg.Address, err)
	}
	e.conn = ssh.NewClient(c, chans, reqs)
	go func(conn *ssh.Client) {
		_ = conn.Wait()
		e.mu.Lock()
		if e.conn == conn {
			e.conn = nil
		}
		e.mu.Unlock()
	}(e.conn)
	return e.conn, nil
}

// Name is "ssh".
func (e *Executor) Name() string { return "ssh" }

// Isolation is what the remote side reported on its last call.
func (e *Executor) Isolation() sandbox.Isolation {
	e.mu.Lock()
	mech := e.mech
	e.mu.Unlock()
	if mech == nil {
		mech = []string{"remote host " + e.cfg.Address + " (bubblewrap there when installed, rlimits, wall-time kill; host key pinned)"}
	}
	return sandbox.Isolation{Backend: "ssh", Confined: true, Mechanisms: mech, Interpreter: e.cfg.PythonPath + " on " + e.cfg.Address}
}

// Close closes the connection.
func (e *Executor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.conn != nil {
		err := e.conn.Close()
		e.conn = nil
		return err
	}
	return nil
}

type wireCaps struct {
	WallTime      int64 `json:"wall_time"`
	CPUTime       int64 `json:"cpu_time"`
	MemoryBytes   int64 `json:"memory_bytes"`
	Processes     int   `json:"processes"`
	OutputBytes   int   `json:"output_bytes"`
	FileSizeBytes int64 `json:"file_size_bytes"`
	Network       bool  `json:"network"`
}

// wireFile is [base64 content, mode].
type wireFile [2]json.RawMessage

type wireResult struct {
	Error           string              `json:"error"`
	Stdout          string              `json:"stdout"`
	StdoutTruncated bool                `json:"stdout_truncated"`
	Stderr          string              `json:"stderr"`
	StderrTruncated bool                `json:"stderr_truncated"`
	ExitCode        int                 `json:"exit_code"`
	CapHit          string              `json:"cap_hit"`
	DurationNS      int64               `json:"duration_ns"`
	Files           map[string]wireFile `json:"files"`
	Mechanisms      []string            `json:"mechanisms"`
}

// Run sends the call and its files, waits for the remote result and
// writes the produced files into req.Dir.
func (e *Executor) Run(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	if err := sandbox.Validate(req); err != nil {
		return sandbox.Result{}, err
	}
	if req.Argv != nil {
		return sandbox.Result{}, fmt.Errorf("%w: the ssh executor runs Python code only", sandbox.ErrInvalid)
	}
	if err := os.MkdirAll(req.Dir, 0o755); err != nil {
		return sandbox.Result{}, fmt.Errorf("work directory: %w", err)
	}
	if err := sandbox.WriteFiles(req.Dir, req.Files); err != nil {
		return sandbox.Result{}, err
	}
	files, err := readTree(req.Dir)
	if err != nil {
		return sandbox.Result{}, err
	}
	caps := e.cfg.Caps
	if req.Caps.WallTime > 0 {
		caps = req.Caps.WithDefaults()
	}
	tools := req.Tools
	if tools == nil {
		tools = e.cfg.Tools
	}
	if tools == nil {
		tools = []string{}
	}
	body, err := json.Marshal(map[string]any{"code": req.Code, "files": files, "tools": tools, "caps": wireCaps{
		WallTime: int64(caps.WallTime), CPUTime: int64(caps.CPUTime), MemoryBytes: caps.MemoryBytes, Processes: caps.Processes,
		OutputBytes: caps.OutputBytes, FileSizeBytes: caps.FileSizeBytes, Network: caps.Network}})
	if err != nil {
		return sandbox.Result{}, err
	}
	script, _ := json.Marshal(remoteScript)
	conn, err := e.connect(ctx)
	if err != nil {
		return sandbox.Result{}, err
	}
	sess, err := conn.NewSession()
	if err != nil {
		e.drop(conn)
		return sandbox.Result{}, fmt.Errorf("%w: ssh session: %v", sandbox.ErrUnavailable, err)
	}
	defer sess.Close()
	var stdout, stderr bytes.Buffer
	sess.Stdout = &limited{w: &stdout, n: 256 << 20}
	sess.Stderr = &limited{w: &stderr, n: 64 << 10}
	sess.Stdin = io.MultiReader(bytes.NewReader(script), strings.NewReader("\n"), bytes.NewReader(body))
	cmd := shellQuote(e.cfg.PythonPath) + ` -I -c 'import sys,json;exec(json.loads(sys.stdin.readline()))'`
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- sess.Run(cmd) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		return sandbox.Result{CapHit: sandbox.CapWallTime, ExitCode: -1, Duration: time.Since(start)}, nil
	}
	var wr wireResult
	if jerr := json.Unmarshal(stdout.Bytes(), &wr); jerr != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" && err != nil {
			msg = err.Error()
		}
		return sandbox.Result{}, fmt.Errorf("%w: the remote side of %s did not answer: %s", sandbox.ErrUnavailable, e.cfg.Address, msg)
	}
	if wr.Error != "" {
		return sandbox.Result{}, fmt.Errorf("%w: %s", sandbox.ErrInvalid, wr.Error)
	}
	e.mu.Lock()
	e.mech = append([]string{"remote host " + e.cfg.Address + " (host key pinned)"}, wr.Mechanisms...)
	e.mu.Unlock()
	res := sandbox.Result{ExitCode: wr.ExitCode, CapHit: sandbox.Cap(wr.CapHit), Duration: time.Duration(wr.DurationNS),
		StdoutTruncated: wr.StdoutTruncated, StderrTruncated: wr.StderrTruncated}
	res.Stdout = decode(wr.Stdout)
	res.Stderr = decode(wr.Stderr)
	if res.ExitCode > 128 && res.ExitCode < 128+65 {
		res.Signal = fmt.Sprintf("signal %d", res.ExitCode-128)
	}
	names := make([]string, 0, len(wr.Files))
	for rel := range wr.Files {
		names = append(names, rel)
	}
	sort.Strings(names)
	var back []sandbox.File
	for _, rel := range names {
		var b64 string
		var mode os.FileMode
		if json.Unmarshal(wr.Files[rel][0], &b64) != nil || json.Unmarshal(wr.Files[rel][1], &mode) != nil {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			continue
		}
		back = append(back, sandbox.File{Path: rel, Content: b})
		if err := sandbox.WriteFiles(req.Dir, []sandbox.File{{Path: rel, Content: b}}); err == nil {
			_ = os.Chmod(filepath.Join(req.Dir, filepath.Clean(rel)), mode.Perm()&0o755)
			res.Files = append(res.Files, rel)
		}
	}
	return res, nil
}

func (e *Executor) drop(c *ssh.Client) {
	e.mu.Lock()
	if e.conn == c {
		e.conn = nil
	}
	e.mu.Unlock()
	c.Close()
}

func decode(s string) string {
	b, _ := base64.StdEncoding.DecodeString(s)
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// readTree is dir's regular files, base64, up to MaxCopyBytes.
func readTree(dir string) (map[string][2]any, error) {
	out := map[string][2]any{}
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if total += len(b); total > MaxCopyBytes {
			return fmt.Errorf("%w: the run directory holds more than %d bytes (the ssh executor sends it with each call)", sandbox.ErrInvalid, MaxCopyBytes)
		}
		rel, _ := filepath.Rel(dir, p)
		mode := 0o644
		if fi, err := d.Info(); err == nil {
			mode = int(fi.Mode().Perm())
		}
		out[rel] = [2]any{base64.StdEncoding.EncodeToString(b), mode}
		return nil
	})
	return out, err
}

// limited writes at most n bytes to w (and drops the rest).
type limited struct {
	w io.Writer
	n int
}

func (l *limited) Write(p []byte) (int, error) {
	if l.n <= 0 {
		return len(p), nil
	}
	k := min(len(p), l.n)
	l.n -= k
	_, err := l.w.Write(p[:k])
	return len(p), err
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

var _ = errors.New
