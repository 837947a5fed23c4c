// Package logging builds the gateway's slog logger from the log config.
package logging

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentryhq/agentry/internal/config"
)

// New returns a logger honouring log.level, log.format (json or console) and
// log.file (appended to; relative paths resolve inside the workspace's logs
// folder). The returned closer closes the file, if any.
func New(cfg config.LogConfig, ws config.Workspace, stderr io.Writer) (*slog.Logger, io.Closer, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, nil, fmt.Errorf("log.level: %w", err)
	}
	out := stderr
	var closer io.Closer = io.NopCloser(nil)
	if cfg.File != "" {
		path := cfg.File
		if !filepath.IsAbs(path) {
			path = filepath.Join(ws.LogsDir(), path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, nil, fmt.Errorf("log.file: %w", err)
		}
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o640)
		if err != nil {
			return nil, nil, fmt.Errorf("log.file: %w", err)
		}
		out, closer = f, f
	}
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	if cfg.Format == "json" {
		h = slog.NewJSONHandler(out, opts)
	} else {
		h = slog.NewTextHandler(out, opts)
	}
	return slog.New(h), closer, nil
}
