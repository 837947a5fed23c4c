package config

import (
	"strings"
	"testing"
	"time"
)

func TestSandboxAndExecutorValidated(t *testing.T) {
	for name, tc := range map[string]struct {
		set  func(c *Config)
		want string
	}{
		"unknown backend": {func(c *Config) { c.Executor.Backend = "lambda" }, `executor.backend: unknown backend "lambda"`},
		"ssh without host key": {func(c *Config) {
			c.Executor = ExecutorConfig{Backend: "ssh", SSH: SSHExecutorConfig{Address: "h", User: "u", KeyFile: "k"}}
		}, "executor.ssh: the ssh backend needs"},
		"negative wall time": {func(c *Config) { c.Runtime.Sandbox.WallTime = -time.Second }, "runtime.sandbox.wall_time: must not be negative"},
		"tiny memory":        {func(c *Config) { c.Runtime.Sandbox.MemoryMB = 4 }, "runtime.sandbox.memory_mb"},
		"pool too large":     {func(c *Config) { c.Executor.Pool.Size = 1000 }, "executor.pool.size"},
		"a path as a tool":   {func(c *Config) { c.Runtime.SystemTools = []string{"/bin/sh"} }, "runtime.system_tools[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			c := Defaults()
			tc.set(&c)
			err := Validate(&c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want %q, got %v", tc.want, err)
			}
		})
	}
	c := Defaults()
	c.Runtime.PythonPath, c.Runtime.SystemTools = "/usr/bin/python3", []string{"ls", "sqlite3"}
	c.Runtime.Sandbox = SandboxConfig{WallTime: time.Minute, MemoryMB: 256, Network: true}
	c.Executor = ExecutorConfig{Backend: "pool", Pool: PoolExecutorConfig{Size: 2}}
	if err := Validate(&c); err != nil {
		t.Fatalf("a good sandbox configuration is refused: %v", err)
	}
}
