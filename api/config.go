package api

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
)

// ConfigFeature serves GET and PATCH /config: the configuration file with
// secrets redacted, and edits of it. Changes are written to the file and
// take effect after a restart (the response says so); agent definitions
// are the part of the workspace that reloads live.
type ConfigFeature struct {
	Config *config.Loaded
	mu     sync.Mutex
}

// Register implements Feature.
func (f *ConfigFeature) Register(r fiber.Router) {
	r.Get("/config", f.get)
	r.Patch("/config", f.patch)
}

// MapError implements Feature.
func (f *ConfigFeature) MapError(error) *Error { return nil }

// path is the file edits go to: the one loaded, or the workspace's.
func (f *ConfigFeature) path() string {
	if f.Config.Path != "" {
		return f.Config.Path
	}
	return f.Config.Workspace.ConfigFile()
}

func (f *ConfigFeature) get(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	cfg := f.Config.Config
	tree, err := cfg.RedactedTree()
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"config": tree, "path": f.path()})
}

type configPatch struct {
	Set map[string]any `json:"set"`
}

func (f *ConfigFeature) patch(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var body configPatch
	if err := decodeJSON(c, &body); err != nil {
		return err
	}
	if len(body.Set) == 0 {
		return badRequest("set: give at least one dotted key, e.g. {\"set\": {\"log.level\": \"debug\"}}")
	}
	if v, ok := body.Set["server.port"]; ok {
		// The port a restart will listen on: a whole number in range, not 0
		// (a random port) nor 1.5 (read back as 1).
		if n, isNum := v.(float64); !isNum || n != float64(int(n)) || n < 1 || n > 65535 {
			return badRequest("server.port: %v is not a TCP port (an integer from 1 to 65535)", v).WithCode("invalid")
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	path := f.path()
	current, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w", path, err)
	}
	next, changed, err := config.SetKeys(current, body.Set)
	if err != nil {
		return badRequest("%v", err)
	}
	// Validate the whole result exactly as a start would, before writing.
	cfg := config.Defaults()
	if err := config.Parse(next, path, &cfg); err != nil {
		return badRequest("%v", err)
	}
	if err := config.Validate(&cfg); err != nil {
		return badRequest("%v", err)
	}
	if len(changed) > 0 {
		if err := config.WriteFileAtomic(path, next, 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	tree, err := cfg.RedactedTree()
	if err != nil {
		return err
	}
	if changed == nil {
		changed = []string{}
	}
	return c.JSON(fiber.Map{"config": tree, "path": path, "changed": changed, "restart_required": len(changed) > 0,
		"note": restartNote(changed)})
}

func restartNote(changed []string) string {
	if len(changed) == 0 {
		return "nothing changed"
	}
	return "written to the config file; restart the gateway to apply: " + strings.Join(changed, ", ")
}
