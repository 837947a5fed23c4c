package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/events"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/models"
)

// RevealSecret opens a secret of the gateway's secret store by name.
type RevealSecret func(ctx context.Context, name string) (string, error)

// NewRouter builds the LLM router from llm.providers. API keys come from the
// secret named by api_key_secret (preferred), the variable named by
// api_key_env, or api_key. A named secret that cannot be opened leaves the
// provider without a key and is logged (not a start-up error: the operator
// sets it through the running gateway, `agentry secret set NAME`, and
// restarts it).
func NewRouter(ctx context.Context, cfg *config.Config, reveal RevealSecret, log *slog.Logger) (*llm.Router, error) {
	providers := map[string]llm.Provider{}
	ids := make([]string, 0, len(cfg.LLM.Providers))
	for id := range cfg.LLM.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		pc := cfg.LLM.Providers[id]
		key := pc.APIKey
		if pc.APIKeyEnv != "" {
			key = os.Getenv(pc.APIKeyEnv)
		}
		if pc.APIKeySecret != "" && reveal != nil {
			v, err := reveal(ctx, pc.APIKeySecret)
			if err != nil {
				log.Error("provider has no key: its secret cannot be opened (agentry secret set "+pc.APIKeySecret+", then restart the gateway)",
					"key", "llm.providers."+id+".api_key_secret", "secret", pc.APIKeySecret, "err", err)
			}
			key = v
		}
		p, err := llm.NewProvider(id, llm.ProviderConfig{Type: pc.Type, BaseURL: pc.BaseURL, APIKey: key, Timeout: pc.Timeout, MaxRetries: pc.MaxRetries})
		if err != nil {
			return nil, fmt.Errorf("llm.providers.%s: %w", id, err)
		}
		providers[id] = p
	}
	return llm.NewRouter(providers, cfg.LLM.DefaultProvider), nil
}

// SSRFPolicy is the runtime.ssrf policy.
func SSRFPolicy(cfg *config.Config) netguard.Policy {
	s := cfg.Runtime.SSRF
	return netguard.Policy{Enabled: s.Enabled, AllowLoopback: s.AllowLoopback, AllowPrivate: s.AllowPrivate, AllowedHosts: s.AllowedHosts}
}

// NewCosts builds cost governance over the store, with the agents'
// allowlists and classification; budget alerts go to the log and the
// events table (type cost.budget_alert).
func NewCosts(ctx context.Context, g *Gateway, agents *agentdef.Registry, bus *events.Bus, log *slog.Logger) (*costs.Controller, error) {
	return costs.New(ctx, costs.Options{
		Config: &g.Config.Config, Store: g.Store, Logger: log,
		Agents: func(id string) (costs.AgentPolicy, bool) {
			d, ok := agents.Get(id)
			if !ok {
				return costs.AgentPolicy{}, false
			}
			return costs.AgentPolicy{Provider: d.LLM.Provider, Model: d.LLM.Model, AllowedProviders: d.LLM.AllowedProviders,
				AllowedModels: d.LLM.AllowedModels, DataClassification: d.LLM.DataClassification,
				MaxCostMicros: d.MaxCostMicros()}, true
		},
		OnAlert: func(ctx context.Context, a costs.Alert) {
			if _, err := bus.Publish(ctx, a.Event()); err != nil {
				log.Warn("publish cost budget alert", "err", err)
			}
		},
		OnEvent: func(ctx context.Context, ev *models.Event) {
			if _, err := bus.Publish(ctx, ev); err != nil {
				log.Warn("publish cost event", "type", ev.Type, "err", err)
			}
		},
	})
}
