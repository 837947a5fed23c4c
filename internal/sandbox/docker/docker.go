// Package docker is the executor that runs each call in a fresh container
// through a container engine's HTTP API over its Unix socket (Docker's
// Engine API; Podman's Docker-compatible API answers the same calls). No
// engine reachable at the socket fails New, so a gateway configured with
// this backend does not start. The container: the run directory bound as
// /work (the only writable place: read-only root filesystem, a tmpfs
// /tmp), no network unless caps.Network, every capability dropped,
// no-new-privileges, memory and pids limits, CPU and file-size ulimits,
// removed after the call.
package docker

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/sandbox"
)

// Defaults of executor.docker.
const (
	DefaultSocket = "/var/run/docker.sock"
	DefaultImage  = "python:3.12-slim"
)

// Config is executor.docker.
type Config struct {
	Socket string
	Image  string
	Caps   sandbox.Caps
}

// Executor talks to one engine.
type Executor struct {
	cfg    Config
	http   *http.Client
	engine string
}

// New pings the engine; none reachable is an error naming the socket.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	if cfg.Socket == "" {
		cfg.Socket = DefaultSocket
	}
	cfg.Socket = strings.TrimPrefix(cfg.Socket, "unix://")
	if cfg.Image == "" {
		cfg.Image = DefaultImage
	}
	cfg.Caps = cfg.Caps.WithDefaults()
	e := &Executor{cfg: cfg, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", cfg.Socket)
		}}}}
	var v struct {
		Version string `json:"Version"`
	}
	if err := e.do(ctx, http.MethodGet, "/version", nil, &v); err != nil {
		return nil, fmt.Errorf("%w: no container engine (Docker or Podman) reachable at unix://%s: %v (set executor.docker.socket, or use executor.backend process)",
			sandbox.ErrUnavailable, cfg.Socket, err)
	}
	e.engine = v.Version
	return e, nil
}

// Name is "docker".
func (e *Executor) Name() string { return "docker" }

// Isolation is the container's.
func (e *Executor) Isolation() sandbox.Isolation {
	return sandbox.Isolation{Backend: "docker", Confined: true, Interpreter: "python3 in " + e.cfg.Image,
		Mechanisms: []string{fmt.Sprintf("container engine %s at unix://%s (read-only root, no network, all capabilities dropped, no-new-privileges, memory and pids limits)", e.engine, e.cfg.Socket)}}
}

// Close does nothing.
func (e *Executor) Close() error { return nil }

func (e *Executor) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://engine"+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out != nil {
		if w, ok := out.(*[]byte); ok {
			*w = b
			return nil
		}
		return json.Unmarshal(b, out)
	}
	return nil
}

// Run creates, starts, waits for and removes one container.
func (e *Executor) Run(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	if err := sandbox.Validate(req); err != nil {
		return sandbox.Result{}, err
	}
	if req.Argv != nil {
		return sandbox.Result{}, fmt.Errorf("%w: the docker executor runs Python code only", sandbox.ErrInvalid)
	}
	if err := os.MkdirAll(req.Dir, 0o755); err != nil {
		return sandbox.Result{}, err
	}
	if err := sandbox.WriteFiles(req.Dir, req.Files); err != nil {
		return sandbox.Result{}, err
	}
	dir, err := filepath.Abs(req.Dir)
	if err != nil {
		return sandbox.Result{}, err
	}
	caps := e.cfg.Caps
	if req.Caps.WallTime > 0 {
		caps = req.Caps.WithDefaults()
	}
	network := "none"
	if caps.Network {
		network = "bridge"
	}
	cpu := int64(caps.CPUTime / time.Second)
	spec := map[string]any{
		"Image": e.cfg.Image, "Cmd": []string{"python3", "-I", "-B", "-u", "-c", req.Code},
		"WorkingDir": "/work", "Env": []string{"HOME=/work", "LANG=C.UTF-8", "PYTHONUNBUFFERED=1"},
		"User": "65534:65534", "NetworkDisabled": !caps.Network,
		"HostConfig": map[string]any{
			"Binds": []string{dir + ":/work:rw"}, "NetworkMode": network, "ReadonlyRootfs": true,
			"Tmpfs": map[string]string{"/tmp": "rw,nosuid,size=64m"}, "CapDrop": []string{"ALL"},
			"SecurityOpt": []string{"no-new-privileges"}, "Memory": caps.MemoryBytes, "MemorySwap": caps.MemoryBytes,
			"PidsLimit": caps.Processes, "Ulimits": []map[string]any{{"Name": "cpu", "Soft": cpu, "Hard": cpu + 1},
				{"Name": "fsize", "Soft": caps.FileSizeBytes, "Hard": caps.FileSizeBytes}},
		},
	}
	var created struct{ ID string }
	if err := e.do(ctx, http.MethodPost, "/containers/create", spec, &created); err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: create container: %v", sandbox.ErrUnavailable, err)
	}
	defer e.do(context.WithoutCancel(ctx), http.MethodDelete, "/containers/"+created.ID+"?force=true", nil, nil)
	snap := sandbox.Snap(dir)
	start := time.Now()
	if err := e.do(ctx, http.MethodPost, "/containers/"+created.ID+"/start", nil, nil); err != nil {
		return sandbox.Result{}, fmt.Errorf("%w: start container: %v", sandbox.ErrUnavailable, err)
	}
	wctx, cancel := context.WithTimeout(ctx, caps.WallTime)
	defer cancel()
	var waited struct{ StatusCode int }
	res := sandbox.Result{}
	if err := e.do(wctx, http.MethodPost, "/containers/"+created.ID+"/wait", nil, &waited); err != nil {
		_ = e.do(context.WithoutCancel(ctx), http.MethodPost, "/containers/"+created.ID+"/kill", nil, nil)
		res.CapHit, res.ExitCode = sandbox.CapWallTime, -1
	} else {
		res.ExitCode = waited.StatusCode
	}
	res.Duration = time.Since(start)
	var logs []byte
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}}
	_ = e.do(context.WithoutCancel(ctx), http.MethodGet, "/containers/"+created.ID+"/logs?"+q.Encode(), nil, &logs)
	res.Stdout, res.StdoutTruncated, res.Stderr, res.StderrTruncated = demux(logs, caps.OutputBytes)
	var info struct {
		State struct{ OOMKilled bool }
	}
	if e.do(context.WithoutCancel(ctx), http.MethodGet, "/containers/"+created.ID+"/json", nil, &info) == nil && info.State.OOMKilled {
		res.CapHit = sandbox.CapMemory
	}
	if res.CapHit == "" && res.ExitCode == 128+24 {
		res.CapHit = sandbox.CapCPUTime
	}
	res.Files = snap.Changed(dir)
	return res, nil
}

// demux splits the engine's multiplexed log stream (8-byte frame headers:
// stream, 0, 0, 0, big-endian length), keeping max bytes of each.
func demux(b []byte, max int) (string, bool, string, bool) {
	var out, errb bytes.Buffer
	for len(b) >= 8 {
		n := int(binary.BigEndian.Uint32(b[4:8]))
		stream := b[0]
		b = b[8:]
		if n > len(b) {
			n = len(b)
		}
		if stream == 2 {
			errb.Write(b[:n])
		} else {
			out.Write(b[:n])
		}
		b = b[n:]
	}
	cut := func(buf bytes.Buffer) (string, bool) {
		s := buf.String()
		if len(s) > max {
			return strings.ToValidUTF8(s[:max], "\uFFFD"), true
		}
		return strings.ToValidUTF8(s, "\uFFFD"), false
	}
	so, sc := cut(out)
	se, ec := cut(errb)
	return so, sc, se, ec
}
