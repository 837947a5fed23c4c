package gateway

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/docker"
	"github.com/agentryhq/agentry/internal/sandbox/pool"
	"github.com/agentryhq/agentry/internal/sandbox/process"
	sshexec "github.com/agentryhq/agentry/internal/sandbox/ssh"
)

// SandboxCaps are runtime.sandbox's caps.
func SandboxCaps(c *config.Config) sandbox.Caps {
	s := c.Runtime.Sandbox
	return sandbox.Caps{
		WallTime: s.WallTime, CPUTime: s.CPUTime, MemoryBytes: int64(s.MemoryMB) << 20, Processes: s.Processes,
		OutputBytes: s.OutputBytes, FileSizeBytes: int64(s.FileSizeMB) << 20, Network: s.Network,
	}.WithDefaults()
}

// NewJail is the local confinement of run_python and skill tool scripts
// (runtime.python_path, runtime.system_tools, runtime.sandbox).
func NewJail(c *config.Config) *sandbox.Jail {
	return sandbox.NewJail(sandbox.JailConfig{PythonPath: c.Runtime.PythonPath, SystemTools: c.Runtime.SystemTools,
		Caps: SandboxCaps(c), AllowUnconfined: c.Runtime.Sandbox.AllowUnconfined})
}

// NewCodeExecutor builds executor.backend over jail. A backend that cannot
// work (docker with no engine, ssh with no host) fails the start, naming
// the key.
func NewCodeExecutor(ctx context.Context, c *config.Config, jail *sandbox.Jail) (sandbox.Executor, error) {
	e := c.Executor
	switch e.Backend {
	case "", "process":
		return process.New(jail), nil
	case "pool":
		p, err := pool.New(jail, e.Pool.Size, c.Runtime.SystemTools)
		if err != nil {
			return nil, fmt.Errorf("executor.backend pool: %w", err)
		}
		return p, nil
	case "ssh":
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		x, err := sshexec.New(ctx, sshexec.Config{Address: e.SSH.Address, User: e.SSH.User, KeyFile: e.SSH.KeyFile,
			HostKey: e.SSH.HostKey, PythonPath: e.SSH.PythonPath, Caps: SandboxCaps(c)})
		if err != nil {
			return nil, fmt.Errorf("executor.backend ssh: %w", err)
		}
		return x, nil
	case "docker":
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		x, err := docker.New(ctx, docker.Config{Socket: e.Docker.Socket, Image: e.Docker.Image, Caps: SandboxCaps(c)})
		if err != nil {
			return nil, fmt.Errorf("executor.backend docker: %w", err)
		}
		return x, nil
	}
	return nil, fmt.Errorf("executor.backend: unknown backend %q (use process, pool, ssh or docker)", e.Backend)
}

// addSandbox wires run_python's executor into the toolbox.
func (s *Services) addSandbox(ctx context.Context) error {
	cfg := &s.gw.Config.Config
	s.Jail = NewJail(cfg)
	x, err := NewCodeExecutor(ctx, cfg, s.Jail)
	if err != nil {
		return err
	}
	s.Code = x
	s.Toolbox.Code = x
	iso := x.Isolation()
	for _, p := range s.Jail.ToolProblems() {
		s.log.Warn("runtime.system_tools: "+p, "key", "runtime.system_tools")
	}
	if iso.Refuses != "" {
		s.log.Warn("run_python is refused: "+iso.Refuses, "backend", iso.Backend)
	} else {
		s.log.Info("run_python sandbox", "isolation", iso.Summary())
	}
	return nil
}

// SandboxCheck is the sandbox's health warning: run_python refused (no
// isolation and no consent) or running unconfined.
func SandboxCheck(x sandbox.Executor) func(context.Context) error {
	return func(context.Context) error {
		iso := x.Isolation()
		switch {
		case iso.Refuses != "":
			return errors.New("run_python is refused: " + iso.Refuses)
		case !iso.Confined:
			return errors.New("run_python runs UNCONFINED (runtime.sandbox.allow_unconfined): " + iso.Summary())
		}
		return nil
	}
}
