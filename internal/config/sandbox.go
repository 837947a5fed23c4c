package config

import (
	"fmt"
	"time"
)

// SandboxConfig is runtime.sandbox: the caps of one code execution
// (run_python, skill tool scripts) and whether code may run unconfined
// (docs/sandbox.md). Zero values take the documented defaults.
type SandboxConfig struct {
	WallTime        time.Duration `yaml:"wall_time,omitempty" env:"WALL_TIME"`
	CPUTime         time.Duration `yaml:"cpu_time,omitempty" env:"CPU_TIME"`
	MemoryMB        int           `yaml:"memory_mb,omitempty" env:"MEMORY_MB"`
	Processes       int           `yaml:"processes,omitempty" env:"PROCESSES"`
	OutputBytes     int           `yaml:"output_bytes,omitempty" env:"OUTPUT_BYTES"`
	FileSizeMB      int           `yaml:"file_size_mb,omitempty" env:"FILE_SIZE_MB"`
	Network         bool          `yaml:"network,omitempty" env:"NETWORK"`
	AllowUnconfined bool          `yaml:"allow_unconfined,omitempty" env:"ALLOW_UNCONFINED"`
}

// ExecutorConfig is the executor section: where run_python's code runs.
type ExecutorConfig struct {
	// Backend: process (default), pool, ssh or docker.
	Backend string               `yaml:"backend,omitempty" env:"BACKEND"`
	Pool    PoolExecutorConfig   `yaml:"pool,omitempty" env:", prefix=POOL_"`
	SSH     SSHExecutorConfig    `yaml:"ssh,omitempty" env:", prefix=SSH_"`
	Docker  DockerExecutorConfig `yaml:"docker,omitempty" env:", prefix=DOCKER_"`
}

// PoolExecutorConfig shapes the pre-forked pool.
type PoolExecutorConfig struct {
	// Size is how many warm interpreters wait (default 4).
	Size int `yaml:"size,omitempty" env:"SIZE"`
}

// SSHExecutorConfig is the remote host of the ssh backend.
type SSHExecutorConfig struct {
	// Address is host:port (port 22 when left out).
	Address string `yaml:"address,omitempty" env:"ADDRESS"`
	User    string `yaml:"user,omitempty" env:"USER"`
	// KeyFile is the private key (key auth only).
	KeyFile string `yaml:"key_file,omitempty" env:"KEY_FILE"`
	// HostKey pins the server's host key, in authorized_keys form
	// ("ssh-ed25519 AAAA..."); a different key refuses the connection.
	HostKey string `yaml:"host_key,omitempty" env:"HOST_KEY"`
	// PythonPath is the remote interpreter (default python3).
	PythonPath string `yaml:"python_path,omitempty" env:"PYTHON_PATH"`
}

// DockerExecutorConfig is the container engine of the docker backend.
type DockerExecutorConfig struct {
	// Socket is the engine's API socket (default /var/run/docker.sock;
	// Podman's compatible API socket works too).
	Socket string `yaml:"socket,omitempty" env:"SOCKET"`
	// Image runs the code (default python:3.12-slim).
	Image string `yaml:"image,omitempty" env:"IMAGE"`
}

// ExecutorBackends are the values of executor.backend.
var ExecutorBackends = []string{"process", "pool", "ssh", "docker"}

func validateSandbox(c *Config, bad func(key, format string, args ...any)) {
	s := c.Runtime.Sandbox
	for key, d := range map[string]time.Duration{"runtime.sandbox.wall_time": s.WallTime, "runtime.sandbox.cpu_time": s.CPUTime} {
		if d < 0 {
			bad(key, "must not be negative")
		}
	}
	for key, n := range map[string]int{"runtime.sandbox.memory_mb": s.MemoryMB, "runtime.sandbox.processes": s.Processes,
		"runtime.sandbox.output_bytes": s.OutputBytes, "runtime.sandbox.file_size_mb": s.FileSizeMB, "executor.pool.size": c.Executor.Pool.Size} {
		if n < 0 {
			bad(key, "must not be negative")
		}
	}
	if s.MemoryMB > 0 && s.MemoryMB < 32 {
		bad("runtime.sandbox.memory_mb", "%d MiB is too little for an interpreter (at least 32)", s.MemoryMB)
	}
	if c.Executor.Pool.Size > 64 {
		bad("executor.pool.size", "%d warm interpreters is too many (at most 64)", c.Executor.Pool.Size)
	}
	for i, t := range c.Runtime.SystemTools {
		if t == "" || containsAny(t, "/ \t") {
			bad(fmt.Sprintf("runtime.system_tools[%d]", i), "%q is not a command name (a name found on the gateway's PATH)", t)
		}
	}
	switch e := c.Executor; e.Backend {
	case "", "process", "pool", "docker":
	case "ssh":
		if e.SSH.Address == "" || e.SSH.User == "" || e.SSH.KeyFile == "" || e.SSH.HostKey == "" {
			bad("executor.ssh", "the ssh backend needs address, user, key_file and host_key (the pinned host key)")
		}
	default:
		bad("executor.backend", "unknown backend %q (use process, pool, ssh or docker)", e.Backend)
	}
}

func containsAny(s, chars string) bool {
	for _, r := range chars {
		for _, x := range s {
			if x == r {
				return true
			}
		}
	}
	return false
}
