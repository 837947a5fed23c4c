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

// NewRouter builds the LLM router from llm.providers. API keys come from the
// variable named by api_key_env (preferred) or api_key.
func NewRouter(cfg *config.Config) (*llm.Router, error) {
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
