package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/approvals"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/pkginstall"
	"github.com/agentryhq/agentry/internal/reconcile"
	"github.com/agentryhq/agentry/internal/schedules"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/internal/skills"
	"github.com/agentryhq/agentry/internal/taskruns"
	"github.com/agentryhq/agentry/internal/webhook"
	"github.com/agentryhq/agentry/models"
)

// errorCase is a domain error as a handler returns it and the answer the
// API gives: status, Retry-After and the exact envelope. The answers were
// recorded from the gateway before the fault vocabulary (a mapper per
// feature, tried in order), so this table is the proof that every domain
// error still answers byte for byte as it did.
type errorCase struct {
	name string
	err  error
	want string // "<status> <Retry-After or -> <body>"
}

func wrap(err error) error { return fmt.Errorf("handler context: %w", err) }

func errorCases() []errorCase {
	mustErr := func(err error) error {
		if err == nil {
			panic("no error")
		}
		return err
	}
	_, notJSON := webhook.Map([]byte("{"), nil)
	return []errorCase{
		{"chat invalid", wrap(&fault.Invalid{Field: "text", Msg: "is required"}),
			`400 - {"code":"invalid","error":"text: is required","field":"text"}`},
		{"chat forbidden", &fault.Forbidden{Code: "forbidden", Msg: "only the admin and operator roles may choose a provider or model override"},
			`403 - {"code":"forbidden","error":"only the admin and operator roles may choose a provider or model override"}`},
		{"chat agent not found", fmt.Errorf("%w: bot", chat.ErrAgentNotFound), `404 - {"code":"not_found","error":"agent not found: bot"}`},
		{"chat session not found", wrap(chat.ErrSessionNotFound), `404 - {"code":"not_found","error":"handler context: session not found"}`},
		{"chat response not found", chat.ErrResponseNotFound, `404 - {"code":"not_found","error":"no such response for this agent, session and run"}`},
		{"chat agent disabled", wrap(chat.ErrAgentDisabled), `409 - {"code":"agent_disabled","error":"handler context: agent is disabled"}`},
		{"provider error", wrap(&llm.ProviderError{Provider: "p1", Address: "http://127.0.0.1:1", StatusCode: 500, Message: "boom"}),
			`502 - {"code":"provider_error","error":"llm provider \"p1\" (http://127.0.0.1:1): HTTP 500: boom","provider":"p1"}`},
		{"unknown provider", wrap(&llm.UnknownProviderError{ID: "zz"}), `400 - {"code":"invalid","error":"handler context: unknown llm provider \"zz\""}`},
		{"deadline", wrap(context.DeadlineExceeded), `504 - {"code":"timeout","error":"the agent did not answer in time"}`},
		{"budget", wrap(&costs.Rejection{Code: costs.CodeBudgetExceeded, Message: "day budget exhausted", Estimate: &costs.Estimate{Provider: "p1", Model: "m1"}, Scope: "day"}),
			`402 - {"code":"budget_exceeded","error":"day budget exhausted","estimate":{"provider":"p1","model":"m1","input_tokens":0,"cached_input_tokens":0,"output_tokens":0,"cost_micros":0,"cost_usd":0,"pricing_status":""},"scope":"day"}`},
		{"rate limited", &costs.Rejection{Code: costs.CodeProviderTPM, Message: "slow down", RetryAfter: 2500 * time.Millisecond, Provider: "p1", Model: "m1"},
			`429 3 {"code":"provider_tpm","error":"slow down","model":"m1","provider":"p1","retry_after_seconds":3}`},
		{"circuit open", &costs.Rejection{Code: costs.CodeCircuitOpen, Message: "open", RetryAfter: 200 * time.Millisecond},
			`503 1 {"code":"circuit_open","error":"open","retry_after_seconds":1}`},
		{"confirmation", &costs.Rejection{Code: costs.CodeConfirmationRequired, Message: "confirm"}, `409 - {"code":"confirmation_required","error":"confirm"}`},
		{"unknown rejection code", &costs.Rejection{Code: "odd", Message: "odd"}, `403 - {"code":"odd","error":"odd"}`},
		{"costs input", wrap(&fault.Invalid{Field: "group_by", Msg: "unknown"}), `400 - {"code":"invalid","error":"group_by: unknown","field":"group_by"}`},
		{"no schedule", fmt.Errorf("%w: bot", schedules.ErrNoSchedule), `404 - {"code":"not_found","error":"agent has no schedule (trigger is not cron): bot"}`},
		{"schedule agent disabled", schedules.ErrAgentDisabled, `409 - {"code":"agent_disabled","error":"agent is disabled"}`},
		{"schedules unavailable", fmt.Errorf("%w (describe x: dial refused)", schedules.ErrUnavailable),
			`503 5 {"code":"temporal_unavailable","error":"the workflow engine (Temporal) is unavailable; try again shortly"}`},
		{"skill invalid", &fault.Invalid{Msg: "source is required"}, `400 - {"code":"invalid","error":"source is required"}`},
		{"skill refused", wrap(&skills.RefusedError{Dir: "/x", Reason: "no SKILL.md"}),
			`400 - {"code":"skill_refused","error":"skill /x refused: no SKILL.md","reason":"no SKILL.md"}`},
		{"skill policy", &fault.Forbidden{Code: "policy", Msg: "file:// sources are for clients on the gateway host only"},
			`403 - {"code":"policy","error":"file:// sources are for clients on the gateway host only"}`},
		{"skill fetch", &skills.FetchError{Source: "https://git.example/x", Msg: "404"},
			`502 - {"code":"fetch_failed","error":"fetch https://git.example/x: 404","source":"https://git.example/x"}`},
		{"skill consent", &skills.ConsentError{Code: "changed", Msg: "the source changed", Plan: &skills.Plan{Name: "s"}},
			`409 - {"code":"changed","error":"the source changed","plan":{"name":"s","description":"","source":"","source_kind":"","digest":"","tools":null,"scan":{"verdict":"","runs":null,"network":null,"files":null,"findings":null,"scripts":null},"dry_run":null,"verdict":"","installed":false}}`},
		{"skill not found", wrap(skills.ErrNotFound), `404 - {"code":"not_found","error":"handler context: skill not found"}`},
		{"approval decided", wrap(&approvals.DecidedError{Approval: &models.Approval{ID: 7, Status: "approved", DecidedBy: "bob", Comment: "fine"}}),
			`409 - {"approval_id":7,"code":"approval_decided","comment":"fine","decided_by":"bob","error":"approval 7 is already approved by bob","status":"approved"}`},
		{"approval temporal", fmt.Errorf("decide approval 7: %w: %w", approvals.ErrTemporalUnavailable, errors.New("rpc error")),
			`503 5 {"code":"temporal_unavailable","error":"the workflow engine (Temporal) is unavailable; try again shortly"}`},
		{"validation", wrap(&models.ValidationError{Field: "title", Msg: "is required"}), `400 - {"code":"invalid","error":"title: is required","field":"title"}`},
		{"not found row", wrap(&models.NotFoundError{Kind: "task", ID: 3}), `404 - {"code":"not_found","error":"task 3 not found"}`},
		{"conflict with run", wrap(&models.ConflictError{Code: "run_active", Msg: "a run is already active", RunID: 5, Status: "running"}),
			`409 - {"code":"run_active","error":"a run is already active","run_id":5,"status":"running"}`},
		{"conflict sentinel", models.ErrNotInReview, `409 - {"code":"not_in_review","error":"the task is not awaiting review"}`},
		{"taskruns temporal", fmt.Errorf("start run of task 1: %w: %w", taskruns.ErrTemporalUnavailable, errors.New("dial")),
			`503 5 {"code":"temporal_unavailable","error":"the workflow engine (Temporal) is unavailable; try again shortly"}`},
		{"pkginstall invalid", mustErr(pkginstall.ValidateSource("")),
			`400 - {"code":"invalid","error":"invalid package install request: source is empty: give a git URL","field":"source"}`},
		{"host build", fmt.Errorf("%w: x is not in package_installs.host_build_catalog (0 entries)", pkginstall.ErrHostBuildNotApproved),
			`403 - {"code":"host_build_not_approved","error":"host build not approved: x is not in package_installs.host_build_catalog (0 entries)","field":"allow_host_build"}`},
		{"reconcile day", mustErr(reconcile.CheckDay("yesterday", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))),
			`400 - {"code":"invalid","error":"day \"yesterday\" is not a date (YYYY-MM-DD)","field":"day"}`},
		{"reconcile future day", mustErr(reconcile.CheckDay("2026-01-02", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC))),
			`400 - {"code":"invalid","error":"2026-01-02 is not a completed UTC day (the latest is 2026-01-01)","field":"day"}`},
		{"reconcile not configured", reconcile.ErrNotConfigured,
			`409 - {"code":"not_configured","error":"no provider is configured under costs.reconciliation.providers; add one (type, base_url, api_key_env) to run reconciliation"}`},
		{"not webhook agent", webhook.ErrNotWebhookAgent, `404 - {"code":"not_found","error":"agent does not accept webhooks (its trigger is not webhook)"}`},
		{"async unavailable", wrap(webhook.ErrAsyncUnavailable),
			`503 - {"code":"not_enabled","error":"handler context: asynchronous webhook runs need the durable run engine, which this gateway does not run"}`},
		{"not json", notJSON, `400 - {"code":"invalid","error":"the webhook body is not valid JSON"}`},
		{"webhook invalid", &fault.Invalid{Field: "Idempotency-Key", Msg: "is longer than 200 characters"},
			`400 - {"code":"invalid","error":"Idempotency-Key: is longer than 200 characters","field":"Idempotency-Key"}`},
		{"key reused", wrap(webhook.ErrIdempotencyKeyReused), `409 - {"code":"idempotency_key_reused","error":"handler context: Idempotency-Key was already used with a different body"}`},
		{"key in progress", wrap(&webhook.InProgressError{RetryAfter: 7 * time.Second}),
			`409 7 {"code":"idempotency_key_in_progress","error":"handler context: a request with this Idempotency-Key is still running; retry after Retry-After seconds"}`},
		{"key in progress bare", webhook.ErrIdempotencyInProgress,
			`409 5 {"code":"idempotency_key_in_progress","error":"a request with this Idempotency-Key is still running; retry after Retry-After seconds"}`},
		{"mcp invalid", &fault.Invalid{Field: "url", Msg: "is required for the http transport"},
			`400 - {"code":"invalid","error":"url: is required for the http transport","field":"url"}`},
		{"mcp policy", &mcp.PolicyError{ServerID: "s1", Msg: "https only"}, `403 - {"code":"policy","error":"mcp server s1: https only","server":"s1"}`},
		{"mcp unreachable", wrap(&mcp.UnreachableError{ServerID: "s1", Msg: "refused"}), `502 - {"code":"mcp_unreachable","error":"mcp server s1: refused","server":"s1"}`},
		{"mcp config owned", &mcp.ConfigOwnedError{ServerID: "s1"},
			`409 - {"code":"conflict","error":"mcp server s1 is defined in config.yaml (mcp.s1); change it there","server":"s1"}`},
		{"mcp not found", mcp.ErrNotFound, `404 - {"code":"not_found","error":"mcp server not found"}`},
		{"package", wrap(&agentpkg.Error{Kind: agentpkg.KindDefinition, Msg: "bad definition"}), `400 - {"code":"invalid_definition","error":"bad definition"}`},
		{"agent definition", &agentdef.ValidationError{Problems: []agentdef.FieldError{{File: "a.yaml", Line: 3, Key: "llm.model", Msg: "is required"}, {File: "a.yaml", Msg: "bad"}}},
			`400 - {"code":"invalid_definition","error":"a.yaml:3: llm.model: is required; a.yaml: bad","problems":[{"file":"a.yaml","key":"llm.model","line":3,"message":"is required"},{"file":"a.yaml","key":"","line":0,"message":"bad"}]}`},
		{"agent outside", &agentdef.OutsideDirError{ID: "bot", File: "/etc/bot.yaml", Dir: "/ws/agents"},
			`409 - {"code":"outside_workspace","error":"agent \"bot\" is defined in /etc/bot.yaml, outside the workspace agents folder /ws/agents; edit or remove that file by hand","file":"/etc/bot.yaml"}`},
		{"agent exists", fmt.Errorf("%w: bot", agentdef.ErrExists), `409 - {"code":"exists","error":"agent already exists: bot"}`},
		{"agent not found", fmt.Errorf("%w: bot", agentdef.ErrNotFound), `404 - {"code":"not_found","error":"agent not found: bot"}`},
		{"secret invalid", &fault.Invalid{Msg: "secret value is empty"}, `400 - {"code":"invalid","error":"secret value is empty"}`},
		{"secret not found", secrets.ErrNotFound, `404 - {"code":"not_found","error":"secret not found"}`},
		{"unknown channel", fmt.Errorf("%w: slack", delivery.ErrUnknownChannel), `404 - {"code":"not_found","error":"unknown channel: slack"}`},
		{"channel disabled", delivery.ErrChannelDisabled, `409 - {"code":"channel_disabled","error":"channel is disabled"}`},
		{"no destination", delivery.ErrNoDestination, `409 - {"code":"no_destination","error":"channel has no url"}`},
		{"channel setting", &fault.Invalid{Field: "settings.url", Msg: "expected a string"},
			`400 - {"code":"invalid","error":"settings.url: expected a string","field":"settings.url"}`},
		{"destination refused", wrap(&delivery.TargetError{Field: "to", Msg: "blocked"}), `400 - {"code":"destination_refused","error":"to: blocked","field":"to"}`},
		{"send invalid", &fault.Invalid{Field: "text", Msg: "is required"}, `400 - {"code":"invalid","error":"text: is required","field":"text"}`},
		{"delivery unavailable", fmt.Errorf("%w (dial)", delivery.ErrUnavailable),
			`503 5 {"code":"temporal_unavailable","error":"the workflow engine (Temporal) is unavailable; the message was not queued, try again shortly"}`},
		{"db overloaded", fmt.Errorf("write ledger row: %w", models.ErrOverloaded),
			`503 1 {"code":"overloaded","error":"the gateway is overloaded: too many writes waiting for the database; retry shortly"}`},
		{"internal", errors.New("/secret/path: sql failure"), `500 - {"error":"internal error"}`},
	}
}

// errorsFeature answers GET /errors/<i> with the i-th case's error.
type errorsFeature struct{ cases []errorCase }

func (f errorsFeature) Register(r fiber.Router) {
	r.Get("/errors/:i", func(c *fiber.Ctx) error {
		i, _ := strconv.Atoi(c.Params("i"))
		return f.cases[i].err
	})
}

// TestDomainErrorsAnswerAsBefore: every domain error answers with the
// status, Retry-After and envelope it answered with before.
func TestDomainErrorsAnswerAsBefore(t *testing.T) {
	cases := errorCases()
	s := newTestServer(t, func(d *Deps) { d.Features = []Feature{errorsFeature{cases}} })
	for i, tc := range cases {
		req := httptest.NewRequest("GET", fmt.Sprintf("/api/v1/errors/%d", i), nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := s.App().Test(req, -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		retry := resp.Header.Get("Retry-After")
		if retry == "" {
			retry = "-"
		}
		if got := fmt.Sprintf("%d %s %s", resp.StatusCode, retry, body); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// TestEveryKindHasAStatus: a kind added to the vocabulary without a status
// here would answer 500.
func TestEveryKindHasAStatus(t *testing.T) {
	for k := fault.KindInvalid; k <= fault.KindTimeout; k++ {
		if int(k) >= len(kindStatus) || kindStatus[k] == 0 {
			t.Errorf("kind %s has no status", k)
		}
	}
}

// TestStreamErrorFrameUsesTheVocabulary: the chat stream's error frame
// carries the fault's text and code, and "internal error" for the rest.
func TestStreamErrorFrameUsesTheVocabulary(t *testing.T) {
	if e := faultError(wrap(&costs.Rejection{Code: costs.CodeQuota, Message: "quota"})); e == nil || e.Code != "quota" || e.Message != "quota" || e.Status != 429 {
		t.Fatalf("rejection: %+v", e)
	}
	if e := faultError(errors.New("disk on fire")); e != nil {
		t.Fatalf("plain error mapped: %+v", e)
	}
}
