package costs_test

import (
	"context"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// clock is a settable clock shared by the controller and the limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().UTC()} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// env is a controller over a real database, installed as the gate of a
// router whose providers are real HTTP clients of the fake provider.
type env struct {
	t      testing.TB
	store  *models.Store
	fake   *fakellm.Server
	router *llm.Router
	ctrl   *costs.Controller
	cfg    *config.Config
	clock  *clock
	dsn    string // PostgreSQL only
}

type envOptions struct {
	postgres bool
	// dsn reuses a database (two controllers = two gateway processes).
	dsn     string
	fake    *fakellm.Server
	limiter costs.Limiter
	agents  costs.AgentLookup
	alerts  func(costs.Alert)
}

// baseConfig prices openai/gpt-4o-mini at $1 input / $100 output per million
// tokens (output tokens cost 100 micro-dollars each).
func baseConfig(fakeURL string) *config.Config {
	cfg := config.Defaults()
	cfg.LLM.DefaultProvider = "openai"
	cfg.LLM.Providers = map[string]config.ProviderConfig{
		"openai":    {Type: "openai", BaseURL: fakeURL + "/v1", DefaultModel: "gpt-4o-mini", MaxRetries: -1},
		"anthropic": {Type: "anthropic", BaseURL: fakeURL, DefaultModel: "claude-3-5-haiku", MaxRetries: -1},
		"ollama":    {Type: "ollama", BaseURL: fakeURL, DefaultModel: "llama3.2", Local: true, MaxRetries: -1},
	}
	cfg.Costs.Pricing = map[string]config.PriceConfig{
		"openai/gpt-4o-mini":         {InputPerMTok: 1, OutputPerMTok: 100, Source: "test", EffectiveDate: "2024-01-01", Version: "v1"},
		"anthropic/claude-3-5-haiku": {InputPerMTok: 0.8, OutputPerMTok: 4, Source: "test", Version: "a1"},
	}
	return &cfg
}

func newEnv(t testing.TB, o envOptions, mutate func(*config.Config)) *env {
	t.Helper()
	fake := o.fake
	if fake == nil {
		fake = fakellm.New()
		if err := fake.Start("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(fake.Close)
	}
	cfg := baseConfig(fake.URL())
	if mutate != nil {
		mutate(cfg)
	}
	if err := config.Validate(cfg); err != nil {
		t.Fatal(err)
	}
	opts := models.Options{Driver: models.DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")}
	switch {
	case o.dsn != "":
		opts = models.Options{Driver: models.DriverPostgres, DSN: o.dsn}
	case o.postgres:
		dsn := testenv.Postgres(t)
		if dsn == "" {
			t.Skip("PostgreSQL not available")
		}
		opts = models.Options{Driver: models.DriverPostgres, DSN: dsn}
	}
	ctx := context.Background()
	store, err := models.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	clk := newClock()
	ctrlOpts := costs.Options{Config: cfg, Store: store, Limiter: o.limiter, Agents: o.agents, Now: clk.Now}
	if o.alerts != nil {
		ctrlOpts.OnAlert = func(_ context.Context, a costs.Alert) { o.alerts(a) }
	}
	ctrl, err := costs.New(ctx, ctrlOpts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	providers := map[string]llm.Provider{}
	ids := make([]string, 0, len(cfg.LLM.Providers))
	for id := range cfg.LLM.Providers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		pc := cfg.LLM.Providers[id]
		p, err := llm.NewProvider(id, llm.ProviderConfig{Type: pc.Type, BaseURL: pc.BaseURL, MaxRetries: pc.MaxRetries})
		if err != nil {
			t.Fatal(err)
		}
		providers[id] = p
	}
	router := llm.NewRouter(providers, cfg.LLM.DefaultProvider)
	router.SetGate(ctrl)
	e := &env{t: t, store: store, fake: fake, router: router, ctrl: ctrl, cfg: cfg, clock: clk}
	if opts.Driver == models.DriverPostgres {
		e.dsn = opts.DSN
	}
	return e
}

// call builds a chat call of subject to provider/model with maxTokens.
func call(provider, model, text string, maxTokens int) *llm.Call {
	return &llm.Call{Provider: provider, Model: model,
		Request: llm.Request{Messages: []llm.Message{{Role: llm.RoleUser, Content: text}}, MaxTokens: maxTokens},
		Meta:    llm.CallMeta{Subject: "alice", Source: llm.SourceChat, Trigger: "api", AgentID: "helper", RunID: "run-" + text}}
}

func (e *env) row(callID string) *models.LedgerEntry {
	e.t.Helper()
	row, err := e.store.GetLedgerEntry(context.Background(), callID)
	if err != nil {
		e.t.Fatalf("ledger row %s: %v", callID, err)
	}
	return row
}

func (e *env) rows() []models.LedgerEntry {
	e.t.Helper()
	rows, err := e.store.ListLedger(context.Background(), models.LedgerFilter{}, 100000)
	if err != nil {
		e.t.Fatal(err)
	}
	return rows
}

func (e *env) reservations() models.ReservationSummary {
	e.t.Helper()
	if err := e.ctrl.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	rs, err := e.store.SummarizeReservations(context.Background(), time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func (e *env) counter(key string) models.CounterValue {
	e.t.Helper()
	if err := e.ctrl.Flush(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	m, err := e.store.BudgetCounters(context.Background(), []string{key})
	if err != nil {
		e.t.Fatal(err)
	}
	return m[key]
}

func dayKey(t time.Time) string { return "day:" + t.UTC().Format(time.DateOnly) }
