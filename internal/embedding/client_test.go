package embedding_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/dev/fakellm"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/embedding"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// env is the governed path for real: a cost controller over a real SQLite
// database as the gate of a router whose providers are HTTP clients of the
// fake provider.
type env struct {
	t      *testing.T
	fake   *fakellm.Server
	store  *models.Store
	ctrl   *costs.Controller
	router *llm.Router
}

// Prices: $2 per million input tokens (2 micro-dollars a token) on both
// embedding models, no output price (as embedding models are priced).
func newEnv(t *testing.T, mutate func(*config.Config)) *env {
	t.Helper()
	fake := fakellm.New()
	if err := fake.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.Close)
	cfg := config.Defaults()
	cfg.LLM.DefaultProvider = "openai"
	cfg.LLM.Providers = map[string]config.ProviderConfig{
		"openai":    {Type: "openai", BaseURL: fake.OpenAIBaseURL(), DefaultModel: "gpt-4o-mini", MaxRetries: -1},
		"ollama":    {Type: "ollama", BaseURL: fake.URL(), DefaultModel: "llama3.2", Local: true, MaxRetries: -1},
		"anthropic": {Type: "anthropic", BaseURL: fake.URL(), DefaultModel: "claude-3-5-haiku", MaxRetries: -1},
	}
	cfg.Costs.Pricing = map[string]config.PriceConfig{
		"openai/text-embedding-3-small": {InputPerMTok: 2, OutputPerMTok: 0, Source: "test", Version: "e1"},
		"ollama/nomic-embed-text":       {InputPerMTok: 2, Source: "test", Version: "e1"},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := config.Validate(&cfg); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	store, err := models.Open(ctx, models.Options{Driver: models.DriverSQLite, DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ctrl, err := costs.New(ctx, costs.Options{Config: &cfg, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctrl.Close() })
	providers := map[string]llm.Provider{}
	for id, pc := range cfg.LLM.Providers {
		p, err := llm.NewProvider(id, llm.ProviderConfig{Type: pc.Type, BaseURL: pc.BaseURL, MaxRetries: pc.MaxRetries})
		if err != nil {
			t.Fatal(err)
		}
		providers[id] = p
	}
	router := llm.NewRouter(providers, cfg.LLM.DefaultProvider)
	router.SetGate(ctrl)
	return &env{t: t, fake: fake, store: store, ctrl: ctrl, router: router}
}

func (e *env) client(provider, model string, batch int) *embedding.Client {
	e.t.Helper()
	c, err := embedding.New(e.router, embedding.Options{Provider: provider, Model: model, BatchSize: batch})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
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
	rs, err := e.store.ListLedger(context.Background(), models.LedgerFilter{}, 1000)
	if err != nil {
		e.t.Fatal(err)
	}
	return rs
}

func TestEmbedThroughTheCostControllerOnBothWireFormats(t *testing.T) {
	e := newEnv(t, nil)
	for _, tc := range []struct{ provider, model string }{{"openai", "text-embedding-3-small"}, {"ollama", "nomic-embed-text"}} {
		t.Run(tc.provider, func(t *testing.T) {
			c := e.client(tc.provider, tc.model, 0)
			texts := []string{"the cat sat on the mat", "a dog in the fog", "quarterly revenue grew"}
			id := "embed-" + tc.provider
			vecs, err := c.Embed(context.Background(), texts, llm.CallMeta{CallID: id, Subject: "ingest", AgentID: "helper"})
			if err != nil {
				t.Fatal(err)
			}
			if len(vecs) != 3 {
				t.Fatalf("%d vectors for 3 texts", len(vecs))
			}
			for i, v := range vecs {
				want := fakellm.EmbedText(texts[i], 0)
				if len(v) != fakellm.DefaultEmbeddingDimensions || v[0] != want[0] || v[17] != want[17] {
					t.Fatalf("vector %d (len %d) is not the fake's embedding of its text, in order", i, len(v))
				}
			}
			row := e.row(id)
			var wantTokens int64
			for _, s := range texts {
				wantTokens += max(1, int64(len(s)/4))
			}
			if row.Source != llm.SourceEmbedding || row.Outcome != models.OutcomeSucceeded || row.Provider != tc.provider || row.Model != tc.model {
				t.Fatalf("ledger row: %+v", row)
			}
			if row.InputTokens != wantTokens || row.OutputTokens != 0 || row.UsageEstimated || row.MaxOutputTokens != 0 {
				t.Fatalf("usage on the ledger: input %d (want the provider's %d), output %d, estimated %v, max output %d",
					row.InputTokens, wantTokens, row.OutputTokens, row.UsageEstimated, row.MaxOutputTokens)
			}
			if row.CostMicros != 2*wantTokens || row.PricingStatus != models.PricingPriced {
				t.Fatalf("cost %d µ$ (%s), want %d: input tokens at the embedding model's price", row.CostMicros, row.PricingStatus, 2*wantTokens)
			}
			if row.EstimatedInputTokens < wantTokens {
				t.Fatalf("the reservation's estimate (%d tokens) is below the usage (%d)", row.EstimatedInputTokens, wantTokens)
			}
		})
	}
}

func TestStableCallIDIsCountedOnce(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client("openai", "text-embedding-3-small", 0)
	texts := []string{"retried batch one", "retried batch two"}
	meta := llm.CallMeta{CallID: "ingest-doc-7-batch-0"}
	for range 2 { // a retried activity repeats the call
		if _, err := c.Embed(context.Background(), texts, meta); err != nil {
			t.Fatal(err)
		}
	}
	if n := e.fake.CallCount(); n != 2 {
		t.Fatalf("provider calls = %d, want 2", n)
	}
	rows := e.rows()
	if len(rows) != 1 {
		t.Fatalf("ledger rows = %d, want the one of the call id", len(rows))
	}
	// One row for the call; both executions reached the provider and were
	// paid, so the row holds both (what the provider bills).
	if r := rows[0]; r.Executions != 2 || r.Attempts != 2 || r.InputTokens != 16 || r.CostMicros != 2*16 || r.Outcome != models.OutcomeSucceeded {
		t.Fatalf("row: executions %d attempts %d input %d cost %d outcome %s; want 2 executions on one row, 2x8 tokens, 32 µ$",
			r.Executions, r.Attempts, r.InputTokens, r.CostMicros, r.Outcome)
	}
}

func TestLongListsAreSplitIntoBatchesWithDerivedCallIDs(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client("ollama", "nomic-embed-text", 2)
	texts := []string{"one", "two", "three", "four", "five"}
	vecs, err := c.Embed(context.Background(), texts, llm.CallMeta{CallID: "doc"})
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 5 || vecs[4][0] != fakellm.EmbedText("five", 0)[0] {
		t.Fatalf("vectors out of order or missing: %d", len(vecs))
	}
	if n := e.fake.CallCount(); n != 3 {
		t.Fatalf("provider calls = %d, want 3 batches of at most 2", n)
	}
	for _, id := range []string{"doc", "doc/1", "doc/2"} {
		if r := e.row(id); r.Source != llm.SourceEmbedding {
			t.Fatalf("row %s: %+v", id, r)
		}
	}
}

func TestHardBudgetThatCannotCoverTheCall(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		c.Costs.EnforcementMode = "hard"
		c.Costs.DailyBudgetUSD = 0.00002 // 20 µ$: 10 tokens
	})
	c := e.client("openai", "text-embedding-3-small", 0)
	_, err := c.Embed(context.Background(), []string{strings.Repeat("budget words ", 20)}, llm.CallMeta{CallID: "over"})
	if !errors.Is(err, costs.ErrBudgetExceeded) {
		t.Fatalf("err = %v, want costs.ErrBudgetExceeded", err)
	}
	if n := e.fake.CallCount(); n != 0 {
		t.Fatalf("the provider was called %d times for a refused call", n)
	}
	// A small call still fits.
	if _, err := c.Embed(context.Background(), []string{"tiny"}, llm.CallMeta{CallID: "fits"}); err != nil {
		t.Fatalf("a call the budget covers: %v", err)
	}
}

func TestProviderTPMIsRespected(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		p := c.LLM.Providers["openai"]
		p.MaxTokensPerMinute = 60
		c.LLM.Providers["openai"] = p
	})
	c := e.client("openai", "text-embedding-3-small", 0)
	text := strings.Repeat("tpm ", 30) // 120 bytes: about 40 tokens estimated
	if _, err := c.Embed(context.Background(), []string{text}, llm.CallMeta{}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Embed(context.Background(), []string{text}, llm.CallMeta{})
	if !errors.Is(err, costs.ErrProviderTPM) {
		t.Fatalf("second call within the minute: err = %v, want costs.ErrProviderTPM", err)
	}
	if n := e.fake.CallCount(); n != 1 {
		t.Fatalf("provider calls = %d, want 1", n)
	}
}

func TestProviderFailuresAndRetries(t *testing.T) {
	e := newEnv(t, func(c *config.Config) {
		p := c.LLM.Providers["ollama"]
		p.MaxRetries = 1
		c.LLM.Providers["ollama"] = p
	})
	// The env's providers are built from the config with its MaxRetries.
	e.fake.Script(fakellm.Rule{Contains: "busy", Times: 1, Status: 429, RetryAfter: "0", Message: "slow down"})
	c := e.client("ollama", "nomic-embed-text", 0)
	vecs, err := c.Embed(context.Background(), []string{"busy provider"}, llm.CallMeta{CallID: "retried"})
	if err != nil || len(vecs) != 1 {
		t.Fatalf("a 429 then a success: %v", err)
	}
	if r := e.row("retried"); r.Attempts != 2 || r.Outcome != models.OutcomeSucceeded {
		t.Fatalf("row after one retry: attempts %d outcome %s", r.Attempts, r.Outcome)
	}
	e.fake.Script(fakellm.Rule{Contains: "broken", Status: 500})
	_, err = c.Embed(context.Background(), []string{"broken provider"}, llm.CallMeta{CallID: "failed"})
	var pe *llm.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 500 {
		t.Fatalf("err = %v, want the provider's 500", err)
	}
	if r := e.row("failed"); r.Outcome != models.OutcomeFailed || r.CostMicros != 0 {
		t.Fatalf("failed call's row: %+v", r)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, nil)
	c := e.client("openai", "text-embedding-3-small", 0)
	var inv *fault.Invalid
	if _, err := c.Embed(context.Background(), []string{"fine", "  \n"}, llm.CallMeta{}); !errors.As(err, &inv) || inv.Field != "texts[1]" {
		t.Fatalf("an empty text: err = %v, want invalid texts[1]", err)
	}
	if vecs, err := c.Embed(context.Background(), nil, llm.CallMeta{}); err != nil || len(vecs) != 0 {
		t.Fatalf("no texts: %v %v", vecs, err)
	}
	if n := e.fake.CallCount(); n != 0 {
		t.Fatalf("provider called %d times for refused or empty input", n)
	}
	huge := strings.Repeat("a", 100<<10)
	if _, err := c.Embed(context.Background(), []string{huge}, llm.CallMeta{}); err != nil {
		t.Fatalf("a 100 KB text (cut): %v", err)
	}
	if got := len(e.fake.Calls()[0].LastUserMessage); got != embedding.DefaultMaxInputBytes {
		t.Fatalf("the provider got %d bytes, want the text cut to %d", got, embedding.DefaultMaxInputBytes)
	}
	a := e.client("anthropic", "claude-3-5-haiku", 0)
	if _, err := a.Embed(context.Background(), []string{"x"}, llm.CallMeta{}); !errors.Is(err, llm.ErrEmbeddingsUnsupported) {
		t.Fatalf("anthropic: err = %v, want ErrEmbeddingsUnsupported", err)
	}
	if _, err := embedding.New(e.router, embedding.Options{Provider: "openai"}); err == nil {
		t.Fatal("a client without a model was built")
	}
}
