package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Accepted is the 202 answer of an asynchronous webhook call.
type Accepted struct {
	RunID     string `json:"run_id"`
	Status    string `json:"status"`
	SessionID string `json:"session_id"`
	ThreadID  string `json:"thread_id"`
	UserID    string `json:"user_id"`
	// ReplyPath is where the reply is read once the run has finished.
	ReplyPath string `json:"reply_path"`
}

// ErrAsyncUnavailable: the gateway has no Temporal client (503).
var ErrAsyncUnavailable = fault.NotEnabled("asynchronous webhook runs need the durable run engine, which this gateway does not run")

// HandleAsync maps the payload as Handle does and starts the agent as a
// durable WebhookRun workflow instead of running it in the request. With an
// Idempotency-Key the run id is derived from (subject, agent, key), so a
// repeat finds the same run instead of starting another.
func (s *Service) HandleAsync(ctx context.Context, req Request) (*Accepted, error) {
	if s.Temporal == nil {
		return nil, ErrAsyncUnavailable
	}
	def, mapped, creq, err := s.prepare(req)
	if err != nil {
		return nil, err
	}
	subject := "anonymous"
	if p := auth.FromContext(ctx); p != nil {
		subject = p.Subject
	}
	runID := "wr_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if key := strings.TrimSpace(req.IdempotencyKey); key != "" {
		if len(key) > MaxIdempotencyKey {
			return nil, &fault.Invalid{Field: "Idempotency-Key", Msg: fmt.Sprintf("is longer than %d characters", MaxIdempotencyKey)}
		}
		sum := sha256.Sum256([]byte(subject + "\x00" + def.ID + "\x00" + key))
		runID = "wr_" + hex.EncodeToString(sum[:16])
	}
	if creq.SessionID == "" {
		creq.SessionID = "webhook-" + runID
	}
	meta, _ := json.Marshal(creq.Metadata)
	in := workflows.WebhookRunInput{Version: workflows.WebhookRunInputVersion, RunID: runID, AgentID: def.ID, Subject: subject,
		UserID: creq.UserID, Username: creq.Username, SessionID: creq.SessionID, ThreadID: mapped.ThreadID, Text: creq.Text,
		Metadata: string(meta)}
	acc := &Accepted{RunID: runID, Status: models.WebhookRunQueued, SessionID: creq.SessionID, ThreadID: mapped.ThreadID,
		UserID: creq.UserID, ReplyPath: "/api/v1/webhooks/" + def.ID + "/runs/" + runID}
	// The workflow first, then the record: a crash between the two leaves a
	// run whose workflow writes the record itself when it starts, never a
	// record without a run.
	_, err = s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: workflows.WebhookRunWorkflowID(runID), TaskQueue: s.TaskQueue,
		// One run per id, ever: a repeat of a keyed request finds it.
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowExecutionTimeout:                 workflows.WebhookRunExecutionTimeout,
		StaticSummary:                            "Webhook run " + runID + " of " + def.ID,
		// The LLM turns are local activities (WebhookPrepared.LocalLLMTurns).
		WorkflowTaskTimeout: workflows.LocalTurnsWorkflowTaskTimeout,
	}, workflows.WebhookRunWorkflowName, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		// A repeat with the same Idempotency-Key: the run exists.
		if r, gerr := s.Store.GetWebhookRun(ctx, runID); gerr == nil {
			acc.Status = r.Status
		}
		return acc, nil
	}
	if err != nil {
		return nil, fmt.Errorf("start webhook run: %w", err)
	}
	rec := &models.WebhookRun{ID: runID, AgentID: def.ID, Subject: subject, UserID: creq.UserID, SessionID: creq.SessionID,
		ThreadID: mapped.ThreadID, Status: models.WebhookRunQueued}
	if err := s.Store.CreateWebhookRun(detached.Context(ctx), rec); err != nil {
		return nil, err
	}
	return acc, nil
}

// Run returns an asynchronous run of agentID (ErrNotFound for an unknown
// id or one of another agent).
func (s *Service) Run(ctx context.Context, agentID, runID string) (*models.WebhookRun, error) {
	r, err := s.Store.GetWebhookRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.AgentID != agentID {
		return nil, models.ErrNotFound
	}
	return r, nil
}
