package docker_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/docker"
)

// No engine here (no Docker on this machine): New fails naming the socket.
func TestNoEngineFailsClearly(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "docker.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := docker.New(ctx, docker.Config{Socket: sock})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "no container engine") || !strings.Contains(err.Error(), sock) {
		t.Fatalf("want a clear error naming %s, got %v", sock, err)
	}
}
