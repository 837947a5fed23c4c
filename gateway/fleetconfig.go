package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/models"
)

// FleetMemberTTL is how long a process's fleet_members row stands without
// a renewal: a process killed without a clean stop no longer counts after it.
var FleetMemberTTL = 15 * time.Second

// fleetSettings are the settings every gateway and worker sharing one
// database must agree on, by key (docs/decisions.md, "Fleet configuration
// check"): the cost policy (one ledger and one set of budget counters are
// enforced by every process), authentication (a token one gateway accepts
// and another refuses), the Temporal namespace and task queue (workflows one
// process starts must be picked up by the others' workers), rate limits and
// event hooks (run by whichever process holds the hook lease). Secret values
// (API keys, JWT secrets, provider keys) are never part of it, not even
// hashed: a hash of a short secret stored in the database could be guessed.
func fleetSettings(c *config.Config) map[string]any {
	type keyShape struct {
		Subject     string   `json:"subject"`
		Role        string   `json:"role"`
		TrustUserID bool     `json:"trust_user_id"`
		Agents      []string `json:"agents"`
	}
	keys := make([]keyShape, 0, len(c.Auth.Keys))
	for _, k := range c.Auth.Keys {
		keys = append(keys, keyShape{k.Subject, k.Role, k.TrustUserID, k.Agents})
	}
	type hookShape struct {
		On     []string `json:"on"`
		Agents []string `json:"agents"`
		URL    string   `json:"url"`
	}
	hooks := make([]hookShape, 0, len(c.Hooks))
	for _, h := range c.Hooks {
		hooks = append(hooks, hookShape{h.On, h.Agents, h.URL})
	}
	cc := c.Costs
	return map[string]any{
		"temporal.namespace":               c.Temporal.Namespace,
		"temporal.task_queue":              c.Temporal.TaskQueue,
		"auth.mode":                        c.Auth.Mode,
		"auth.keys":                        keys,
		"auth.jwt.issuer":                  c.Auth.JWT.Issuer,
		"auth.jwt.audience":                c.Auth.JWT.Audience,
		"auth.jwt.role_claim":              c.Auth.JWT.RoleClaim,
		"auth.oidc.issuer":                 c.Auth.OIDC.Issuer,
		"auth.oidc.audience":               c.Auth.OIDC.Audience,
		"costs.enforcement_mode":           cc.EnforcementMode,
		"costs.unknown_pricing":            cc.UnknownPricing,
		"costs.daily_budget_usd":           cc.DailyBudgetUSD,
		"costs.monthly_budget_usd":         cc.MonthlyBudgetUSD,
		"costs.per_user_daily_budget_usd":  cc.PerUserDailyBudgetUSD,
		"costs.per_agent_daily_budget_usd": cc.PerAgentDailyBudgetUSD,
		"costs.confirmation_threshold_usd": cc.ConfirmationThresholdUSD,
		"costs.default_max_output_tokens":  cc.DefaultMaxOutputTokens,
		"costs.max_output_tokens_ceiling":  cc.MaxOutputTokensCeiling,
		"costs.reservation_ttl":            cc.ReservationTTL.String(),
		"costs.run_budget_wait":            cc.RunBudgetWait.String(),
		"costs.pricing":                    cc.Pricing,
		"rate_limit.enabled":               c.RateLimit.Enabled,
		"rate_limit.backend":               c.RateLimit.Backend,
		"rate_limit.per_user_rpm":          c.RateLimit.PerUserRPM,
		"rate_limit.per_user_tokens_day":   c.RateLimit.PerUserTokensDay,
		"rate_limit.per_agent_tokens_day":  c.RateLimit.PerAgentTokensDay,
		"hooks":                            hooks,
	}
}

// FleetFingerprint is key -> a short hash of the setting's value.
func FleetFingerprint(c *config.Config) map[string]string {
	out := map[string]string{}
	for k, v := range fleetSettings(c) {
		b, _ := json.Marshal(v) // maps marshal with sorted keys
		sum := sha256.Sum256(b)
		out[k] = hex.EncodeToString(sum[:8])
	}
	return out
}

// differingKeys are the keys both fingerprints have whose hashes differ.
// A key only one side knows (another release) is not compared.
func differingKeys(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; ok && w != v {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// FleetConfigError is a start refused because this process's fleet-wide
// settings differ from the running fleet's.
type FleetConfigError struct {
	Keys    []string
	Holder  string
	Started time.Time
}

func (e *FleetConfigError) Error() string {
	return fmt.Sprintf("fleet configuration: this process's settings differ from the running fleet's "+
		"(newest process %s, started %s) in: %s; every gateway and worker on one database must agree on them "+
		"(docs/scale.md, \"Fleet configuration\"): give this process the fleet's settings, or roll the change out "+
		"with fleet.rollout: true (AGENTRY_FLEET_ROLLOUT=true) on the new processes",
		e.Holder, e.Started.UTC().Format(time.RFC3339), strings.Join(e.Keys, ", "))
}

// refingerprintFleet records cfg's fingerprint for holder after a run-time
// change (PATCH /config), so processes started later are compared with what
// this one enforces now.
func refingerprintFleet(ctx context.Context, store models.FleetStore, cfg *config.Config, holder string) error {
	b, _ := json.Marshal(FleetFingerprint(cfg))
	return store.SetFleetFingerprint(ctx, holder, string(b))
}

// joinFleet records this process in fleet_members after checking its
// fingerprint against the newest live member's, and keeps the row fresh
// until ctx ends; the returned function (wait) removes it after ctx ends.
func joinFleet(ctx context.Context, store models.FleetStore, cfg *config.Config, holder string, log *slog.Logger) (wait func(), err error) {
	fp := FleetFingerprint(cfg)
	b, _ := json.Marshal(fp)
	now := time.Now().UTC()
	m := &models.FleetMember{Holder: holder, Fingerprint: string(b), StartedAt: now, SeenAt: now}
	err = store.JoinFleet(ctx, m, FleetMemberTTL, func(newest *models.FleetMember) error {
		if newest == nil {
			return nil
		}
		var theirs map[string]string
		if err := json.Unmarshal([]byte(newest.Fingerprint), &theirs); err != nil {
			return nil // unreadable (hand-edited): nothing to compare with
		}
		keys := differingKeys(fp, theirs)
		if len(keys) == 0 {
			return nil
		}
		if cfg.Fleet.Rollout {
			log.Warn("fleet configuration differs from the running fleet's; admitted by fleet.rollout: this configuration is now the fleet's",
				"keys", strings.Join(keys, ","), "newest_process", newest.Holder)
			return nil
		}
		return &FleetConfigError{Keys: keys, Holder: newest.Holder, Started: newest.StartedAt}
	})
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(FleetMemberTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				if err := store.LeaveFleet(c, holder); err != nil {
					log.Warn("leaving fleet_members failed; the row expires by itself", "err", err)
				}
				cancel()
				return
			case <-t.C:
				if err := store.RenewFleetMember(ctx, holder, time.Now()); err != nil && ctx.Err() == nil {
					log.Warn("renewing this process's fleet_members row failed", "err", err)
				}
			}
		}
	}()
	return func() { <-done }, nil
}
