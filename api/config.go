package api

import (
	"context"
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

// ConfigFeature serves GET and PATCH /config: the running configuration
// with secrets redacted, and edits of the file. Changes are written to the
// file; the budget keys (LiveCostKeys) take effect at once and GET shows
// them, the others after a restart (the response says so); agent
// definitions are the part of the workspace that reloads live.
type ConfigFeature struct {
	Config *config.Loaded
	// CostsChanged, when set, applies the budget keys (LiveCostKeys) at
	// once: it gets the running configuration with those keys as the file
	// now has them (cost governance reconfigures, runs waiting for budget
	// are told).
	CostsChanged func(ctx context.Context, cfg *config.Config) error
	mu           sync.Mutex
	// live is the configuration cost governance runs with since the last
	// live change (nil: the one loaded at start).
	live *config.Config
}

// LiveCostKeys are the keys PATCH /config applies without a restart (when
// CostsChanged is set): the budgets and quotas a run may be waiting on.
var LiveCostKeys = map[string]func(dst, src *config.Config){
	"costs.enforcement_mode":           func(d, s *config.Config) { d.Costs.EnforcementMode = s.Costs.EnforcementMode },
	"costs.daily_budget_usd":           func(d, s *config.Config) { d.Costs.DailyBudgetUSD = s.Costs.DailyBudgetUSD },
	"costs.monthly_budget_usd":         func(d, s *config.Config) { d.Costs.MonthlyBudgetUSD = s.Costs.MonthlyBudgetUSD },
	"costs.per_user_daily_budget_usd":  func(d, s *config.Config) { d.Costs.PerUserDailyBudgetUSD = s.Costs.PerUserDailyBudgetUSD },
	"costs.per_agent_daily_budget_usd": func(d, s *config.Config) { d.Costs.PerAgentDailyBudgetUSD = s.Costs.PerAgentDailyBudgetUSD },
	"rate_limit.per_user_tokens_day":   func(d, s *config.Config) { d.RateLimit.PerUserTokensDay = s.RateLimit.PerUserTokensDay },
	"rate_limit.per_agent_tokens_day":  func(d, s *config.Config) { d.RateLimit.PerAgentTokensDay = s.RateLimit.PerAgentTokensDay },
}

// Register implements Feature.
func (f *ConfigFeature) Register(r fiber.Router) {
	r.Get("/config", f.get)
	r.Patch("/config", f.patch)
}

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
	cfg := f.running()
	tree, err := cfg.RedactedTree()
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"config": tree, "path": f.path()})
}

// running is the configuration the gateway runs with: the one loaded at
// start with the live changes applied since (GET showed the start-time
// values before, as if a budget raised through PATCH had not taken effect).
func (f *ConfigFeature) running() config.Config {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live != nil {
		return *f.live
	}
	return f.Config.Config
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
	applied, later, err := f.applyLive(c.UserContext(), changed, &cfg)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"config": tree, "path": path, "changed": changed, "applied": applied, "restart_required": len(later) > 0,
		"note": restartNote(applied, later)})
}

// applyLive applies the changed budget keys to the running gateway (the
// other changes wait for a restart): the running configuration with those
// keys taken from the file's new state goes to CostsChanged.
func (f *ConfigFeature) applyLive(ctx context.Context, changed []string, file *config.Config) (applied, later []string, err error) {
	applied, later = []string{}, []string{}
	for _, k := range changed {
		if _, ok := LiveCostKeys[k]; ok && f.CostsChanged != nil {
			applied = append(applied, k)
		} else {
			later = append(later, k)
		}
	}
	if len(applied) == 0 {
		return applied, later, nil
	}
	// Only the changed keys: the others may come from the environment or
	// from earlier live changes, not from the file.
	running := f.Config.Config
	if f.live != nil {
		running = *f.live
	}
	for _, k := range applied {
		LiveCostKeys[k](&running, file)
	}
	if err := f.CostsChanged(ctx, &running); err != nil {
		return nil, nil, fmt.Errorf("written to the config file, but applying it failed (restart to apply): %w", err)
	}
	f.live = &running
	return applied, later, nil
}

func restartNote(applied, later []string) string {
	switch {
	case len(applied) == 0 && len(later) == 0:
		return "nothing changed"
	case len(later) == 0:
		return "written to the config file and applied: " + strings.Join(applied, ", ")
	case len(applied) == 0:
		return "written to the config file; restart the gateway to apply: " + strings.Join(later, ", ")
	}
	return "written to the config file; applied: " + strings.Join(applied, ", ") + "; restart the gateway to apply: " + strings.Join(later, ", ")
}
