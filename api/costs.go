package api

import (
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

// PermCostsRead lets a principal outside the admin and operator roles read
// chargeback, status and the call ledger (granted by a JWT permission).
const PermCostsRead = "costs:read"

// CostsFeature serves the cost endpoints: POST /costs/estimate, GET
// /costs/chargeback, GET /costs/status and GET /costs/calls. The
// controller's rejections (costs.Rejection) are faults: api/errors.go
// answers them with 402/403/409/429/503 and their code on every surface
// whose errors wrap them (chat, webhooks, ...).
type CostsFeature struct {
	Costs *costs.Controller
}

// Register implements Feature.
func (f *CostsFeature) Register(r fiber.Router) {
	r.Post("/costs/estimate", f.estimate)
	r.Get("/costs/chargeback", f.chargeback)
	r.Get("/costs/status", f.status)
	r.Get("/costs/calls", f.calls)
}

func (f *CostsFeature) ready() error {
	if f.Costs == nil {
		return fault.NotEnabled("cost governance not enabled")
	}
	return nil
}

// requireCostReader: chargeback, status and the ledger show everyone's
// spend, so they are for the admin and operator roles (or costs:read).
func requireCostReader(c *fiber.Ctx) error {
	p := Principal(c)
	if p != nil && (p.Role == auth.RoleAdmin || p.Role == auth.RoleOperator || p.Can(PermCostsRead)) {
		return nil
	}
	return &Error{Status: fiber.StatusForbidden, Message: "the admin or operator role (or permission costs:read) is required", Code: "forbidden"}
}

func (f *CostsFeature) estimate(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	var req costs.EstimateRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	subject := ""
	if p := Principal(c); p != nil {
		subject = p.Subject
	}
	res, err := f.Costs.Estimate(c.UserContext(), subject, req)
	if err != nil {
		return err
	}
	return c.JSON(res)
}

// chargebackMetrics are the totals of one chargeback group.
type chargebackMetrics struct {
	Calls               int64   `json:"calls"`
	Attempts            int64   `json:"attempts"`
	InputTokens         int64   `json:"input_tokens"`
	OutputTokens        int64   `json:"output_tokens"`
	CachedInputTokens   int64   `json:"cached_input_tokens"`
	CacheCreationTokens int64   `json:"cache_creation_tokens"`
	ReasoningTokens     int64   `json:"reasoning_tokens"`
	CostMicros          int64   `json:"cost_micros"`
	CostUSD             float64 `json:"cost_usd"`
	UnknownPricedCalls  int64   `json:"unknown_priced_calls"`
	EstimatedCalls      int64   `json:"estimated_usage_calls"`
}

func (m *chargebackMetrics) add(r models.ChargebackRow) {
	m.Calls += r.Calls
	m.Attempts += r.Attempts
	m.InputTokens += r.InputTokens
	m.OutputTokens += r.OutputTokens
	m.CachedInputTokens += r.CachedInputTokens
	m.CacheCreationTokens += r.CacheCreationTokens
	m.ReasoningTokens += r.ReasoningTokens
	m.CostMicros += r.CostMicros
	m.CostUSD = models.MicrosToUSD(m.CostMicros)
	m.UnknownPricedCalls += r.UnknownPricedCalls
	m.EstimatedCalls += r.EstimatedCalls
}

func (m chargebackMetrics) fields() fiber.Map {
	return fiber.Map{"calls": m.Calls, "attempts": m.Attempts, "input_tokens": m.InputTokens, "output_tokens": m.OutputTokens,
		"cached_input_tokens": m.CachedInputTokens, "cache_creation_tokens": m.CacheCreationTokens, "reasoning_tokens": m.ReasoningTokens,
		"cost_micros": m.CostMicros, "cost_usd": m.CostUSD, "unknown_priced_calls": m.UnknownPricedCalls, "estimated_usage_calls": m.EstimatedCalls}
}

func (f *CostsFeature) chargeback(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := requireCostReader(c); err != nil {
		return err
	}
	groupBy, err := costs.ParseGroupBy(c.Query("group_by"))
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	from, err := queryTime(c, "from", false)
	if err != nil {
		return err
	}
	if from.IsZero() {
		from = time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	}
	to, err := queryTime(c, "to", true)
	if err != nil {
		return err
	}
	if !to.IsZero() && !to.After(from) {
		return badRequest("to must be after from").WithCode("invalid").With("field", "to")
	}
	rows, err := f.Costs.Chargeback(c.UserContext(), costs.ChargebackQuery{GroupBy: groupBy, From: from, To: to})
	if err != nil {
		return err
	}
	groups := make([]fiber.Map, 0, len(rows))
	var total chargebackMetrics
	for _, r := range rows {
		var m chargebackMetrics
		m.add(r)
		total.add(r)
		g := m.fields()
		for _, d := range groupBy {
			g[d] = r.Group[d]
		}
		groups = append(groups, g)
	}
	shownTo := to
	if shownTo.IsZero() {
		shownTo = now
	}
	return c.JSON(fiber.Map{"group_by": groupBy, "from": from, "to": shownTo, "groups": groups, "count": len(groups), "totals": total.fields()})
}

// queryTime parses an optional RFC 3339 timestamp or YYYY-MM-DD date (UTC).
// A date as the end of a range includes that whole day.
func queryTime(c *fiber.Ctx, name string, end bool) (time.Time, error) {
	raw := strings.TrimSpace(c.Query(name))
	if raw == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, raw); err == nil {
		return t.UTC(), nil
	}
	if d, err := time.Parse(time.DateOnly, raw); err == nil {
		if end {
			d = d.AddDate(0, 0, 1)
		}
		return d, nil
	}
	return time.Time{}, badRequest("%s must be an RFC 3339 timestamp or a YYYY-MM-DD date, got %q", name, raw).WithCode("invalid").With("field", name)
}

func (f *CostsFeature) status(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := requireCostReader(c); err != nil {
		return err
	}
	st, err := f.Costs.Status(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(st)
}

// callOutcomes are the accepted outcome filters of GET /costs/calls.
var callOutcomes = []string{models.OutcomePending, models.OutcomeSucceeded, models.OutcomeFailed, models.OutcomeIncomplete,
	models.OutcomeCancelled, models.OutcomeTimeout, models.OutcomeRejected, models.OutcomeExpired, models.OutcomeUnsettled}

// calls lists ledger rows (prompt-free): newest first, filtered by call_id,
// run_id, session_id, agent_id, subject, outcome, from, to.
func (f *CostsFeature) calls(c *fiber.Ctx) error {
	if err := f.ready(); err != nil {
		return err
	}
	if err := requireCostReader(c); err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 100, 1, 1000)
	if err != nil {
		return err
	}
	filter := models.LedgerFilter{CallID: c.Query("call_id"), RunID: c.Query("run_id"), SessionID: c.Query("session_id"),
		AgentID: c.Query("agent_id"), Subject: c.Query("subject"), Outcome: c.Query("outcome"), RootRunID: c.Query("root_run_id")}
	if filter.Outcome != "" && !slices.Contains(callOutcomes, filter.Outcome) {
		return badRequest("outcome must be one of %s", strings.Join(callOutcomes, ", ")).WithCode("invalid").With("field", "outcome")
	}
	if filter.From, err = queryTime(c, "from", false); err != nil {
		return err
	}
	if filter.To, err = queryTime(c, "to", true); err != nil {
		return err
	}
	rows, err := f.Costs.Calls(c.UserContext(), filter, limit)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []models.LedgerEntry{}
	}
	return c.JSON(fiber.Map{"calls": rows, "count": len(rows)})
}
