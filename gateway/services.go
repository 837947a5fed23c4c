package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"time"

	"github.com/agentryhq/agentry/api"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/worker"
)

// Services are the feature services built on top of the foundation. Each
// feature adds its service here and its routes through Features.
type Services struct {
	gw     *Gateway
	log    *slog.Logger
	worker *worker.Worker
	cancel context.CancelFunc

	Agents  *agent.Registry
	Router  *llm.Router
	Toolbox *agent.Toolbox
	Chat    *chat.Service
}

// AgentWatchInterval is how often agent files are checked for changes.
var AgentWatchInterval = 2 * time.Second

// NewServices builds the feature services.
func NewServices(ctx context.Context, g *Gateway, log *slog.Logger) (*Services, error) {
	cfg := g.Config
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s := &Services{gw: g, log: log, cancel: cancel}
	s.worker = worker.New(g.Temporal, cfg.Temporal.TaskQueue, log)

	router, err := NewRouter(&cfg.Config)
	if err != nil {
		return nil, err
	}
	s.Router = router
	s.Agents = agent.NewRegistry(append([]string{cfg.Workspace.AgentsDir()}, cfg.AgentDirs...), log)
	go s.Agents.Watch(bg, AgentWatchInterval)
	s.Toolbox = agent.NewToolbox(SSRFPolicy(&cfg.Config), cfg.Runtime.ToolTimeout)
	s.Chat = &chat.Service{Config: cfg, Agents: s.Agents, Router: s.Router, Store: g.Store, Toolbox: s.Toolbox}
	return s, nil
}

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

// Features are the API route groups.
func (s *Services) Features() []api.Feature {
	return []api.Feature{
		&api.AgentsFeature{Agents: s.Agents},
		&api.ChatFeature{Chat: s.Chat},
	}
}

// Worker is the in-process worker; features add registrations before start.
func (s *Services) Worker() *worker.Worker { return s.worker }

// StartWorker starts the in-process Temporal worker.
func (s *Services) StartWorker() error { return s.worker.Start() }

// Stop stops background work.
func (s *Services) Stop() {
	s.cancel()
	if s.worker != nil {
		s.worker.Stop()
	}
}
