package gateway

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

// A gateway configured with the docker backend and no engine at its socket
// does not start: the error names the key and the socket.
func TestDockerBackendWithoutEngineRefusesStart(t *testing.T) {
	c := config.Defaults()
	sock := filepath.Join(t.TempDir(), "docker.sock")
	c.Executor = config.ExecutorConfig{Backend: "docker", Docker: config.DockerExecutorConfig{Socket: sock}}
	_, err := NewCodeExecutor(context.Background(), &c, NewJail(&c))
	if err == nil || !strings.Contains(err.Error(), "executor.backend docker") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("want a start error naming executor.backend docker and %s, got %v", sock, err)
	}
	c.Executor = config.ExecutorConfig{Backend: "ssh", SSH: config.SSHExecutorConfig{Address: "127.0.0.1:1", User: "u", KeyFile: filepath.Join(t.TempDir(), "none"), HostKey: "x"}}
	if _, err := NewCodeExecutor(context.Background(), &c, NewJail(&c)); err == nil || !strings.Contains(err.Error(), "executor.backend ssh") {
		t.Fatalf("want a start error naming executor.backend ssh, got %v", err)
	}
}
