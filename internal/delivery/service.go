package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/sweeper"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ErrUnavailable: the workflow engine did not accept the delivery (503).
var ErrUnavailable = fault.TemporalUnavailable("the workflow engine (Temporal) is unavailable; the message was not queued, try again shortly")

// MaxTextBytes bounds the text of one message (it travels in workflow
// history, which Temporal limits to 2 MB per payload).
const MaxTextBytes = 512 << 10

// ChannelMessage is the JSON body of a channel message, signed as sent.
type ChannelMessage struct {
	DeliveryID string    `json:"delivery_id"`
	Channel    string    `json:"channel"`
	Text       string    `json:"text"`
	To         string    `json:"to,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	Source     string    `json:"source"`
	SessionID  string    `json:"session_id,omitempty"`
	RunID      string    `json:"run_id,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// Service queues outbound messages: each is recorded (table deliveries)
// and handed to its own Delivery workflow, which makes the signed,
// retried attempts.
type Service struct {
	Temporal  client.Client
	TaskQueue string
	Store     models.DeliveryStore
	Channels  *Channels
	Retry     workflows.DeliveryRetry
	Now       func() time.Time
}

// SendRequest is a message to a channel.
type SendRequest struct {
	Channel string
	Text    string
	// To overrides the channel's url for this message only; it must be an
	// absolute http(s) URL that passes the SSRF policy.
	To      string
	AgentID string
	Source  string
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

// Send validates and queues a message; it returns the delivery id. Nothing
// is queued when the channel is unknown (ErrUnknownChannel), disabled
// (ErrChannelDisabled), without a destination (ErrNoDestination), or `to`
// is refused (*TargetError).
func (s *Service) Send(ctx context.Context, req SendRequest) (string, error) {
	if strings.TrimSpace(req.Text) == "" {
		return "", &fault.Invalid{Field: "text", Msg: "is required"}
	}
	if len(req.Text) > MaxTextBytes {
		return "", &fault.Invalid{Field: "text", Msg: fmt.Sprintf("is longer than %d bytes", MaxTextBytes)}
	}
	dest, err := s.Channels.Check(ctx, req.Channel, req.To)
	if err != nil {
		return "", err
	}
	if req.Source == "" {
		req.Source = SourceAPI
	}
	id := NewID()
	msg, err := ChannelInput(ChannelMessage{DeliveryID: id, Channel: req.Channel, Text: req.Text, To: req.To,
		AgentID: req.AgentID, Source: req.Source, CreatedAt: s.now()}, s.Retry)
	if err != nil {
		return "", fmt.Errorf("encode message: %w", err)
	}
	if err := s.Enqueue(ctx, msg, dest); err != nil {
		return "", err
	}
	return id, nil
}

// Enqueue records a message and starts its Delivery workflow. Starting the
// same delivery id twice is a no-op (the workflow id is derived from it).
// The record carries the workflow's input (its outbox entry) until the
// workflow has started: if the process dies in between, Sweep starts it.
func (s *Service) Enqueue(ctx context.Context, msg workflows.DeliveryInput, dest string) error {
	// Once begun, finish even if the caller goes away.
	ctx, cancel := context.WithTimeout(detached.Context(ctx), 30*time.Second)
	defer cancel()
	msg.Retry = msg.Retry.WithDefaults()
	// The body is stored (outbox) and becomes workflow input: scrub it
	// here, not only when it is sent, so no configured secret reaches the
	// database or the Temporal history.
	msg.Body = string(scrub.JSON([]byte(msg.Body)))
	input, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("encode delivery %s: %w", msg.DeliveryID, err)
	}
	d := Record(msg, dest)
	d.StartInput = string(input)
	if err := s.Store.CreateDelivery(ctx, d); err != nil {
		return err
	}
	if err := s.start(ctx, msg, d.Target); err != nil {
		_ = s.Store.FinishDelivery(ctx, msg.DeliveryID, models.DeliveryFailed, "not queued: the workflow engine was unavailable")
		return fmt.Errorf("%w (%v)", ErrUnavailable, err)
	}
	return nil
}

// start starts the Delivery workflow of msg (already started counts as
// started) and empties the record's outbox entry. It is the one place the
// gateway starts a delivery through the client; workflows start theirs as
// children (startDelivery in workflows/delivery.go) with the same id and bounds.
func (s *Service) start(ctx context.Context, msg workflows.DeliveryInput, target string) error {
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.DeliveryWorkflowID(msg.DeliveryID),
		TaskQueue:                s.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionTimeout: workflows.DeliveryExecutionTimeout(msg.Retry),
		StaticSummary:            fmt.Sprintf("Deliver %s to %s (%s)", msg.DeliveryID, msg.Channel, target),
	}, workflows.DeliveryWorkflowName, msg)
	var already *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &already) {
		return err
	}
	// Best effort: a leftover entry only makes the sweep ask again, and
	// Temporal answers "already started".
	_ = s.Store.MarkDeliveryStarted(ctx, msg.DeliveryID)
	return nil
}

// Outbox sweep defaults.
const (
	// SweepEvery is how often RunSweeper looks for unstarted deliveries.
	SweepEvery = time.Minute
	// sweepGrace leaves a just-recorded delivery to the request that is
	// starting it (Enqueue gives up after 30 s).
	sweepGrace = 45 * time.Second
	sweepBatch = 100
)

// Sweep starts the Delivery workflow of every pending delivery created
// before `before` whose outbox entry is still set: the process that recorded
// it died before starting the workflow (or before noting that it had).
// Starting is idempotent (workflow id = delivery id), so a delivery whose
// workflow did start is not sent twice. It returns how many it started.
func (s *Service) Sweep(ctx context.Context, before time.Time) (int, error) {
	started := 0
	for {
		rows, err := s.Store.UnstartedDeliveries(ctx, before, sweepBatch)
		if err != nil || len(rows) == 0 {
			return started, err
		}
		for i := range rows {
			d := &rows[i]
			var msg workflows.DeliveryInput
			if err := json.Unmarshal([]byte(d.StartInput), &msg); err != nil || msg.DeliveryID != d.ID {
				_ = s.Store.FinishDelivery(ctx, d.ID, models.DeliveryFailed, "not queued: its recorded workflow input is unreadable")
				continue
			}
			if err := s.start(ctx, msg, d.Target); err != nil {
				// Temporal is unavailable: try again at the next sweep.
				return started, fmt.Errorf("start delivery %s: %w", d.ID, err)
			}
			started++
		}
		if len(rows) < sweepBatch {
			return started, nil
		}
	}
}

// RunSweeper sweeps once now (every unstarted delivery: at start no request
// of this process is starting one) and then every SweepEvery, leaving
// deliveries younger than the grace period to their request, until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, log *slog.Logger) {
	sweeper.Run(ctx, log, "delivery outbox sweep", "started the workflows of deliveries recorded before a crash",
		SweepEvery, 0, sweepGrace, s.now, s.Sweep) // starting a delivery twice is harmless: no start grace
}

// hookTarget resolves an event hook's destination; the secret comes only
// from the named environment variable.
func hookTarget(h *workflows.HookTarget, env func(string) (string, bool)) (Target, error) {
	t := Target{URL: h.URL, Method: "POST"}
	if h.SecretEnv != "" {
		if env == nil {
			env = os.LookupEnv
		}
		v, ok := env(h.SecretEnv)
		if !ok || v == "" {
			return t, &PermanentError{fmt.Errorf("hook secret_env names %s, which is not set in the gateway's environment; the hook is not sent unsigned", h.SecretEnv)}
		}
		t.Secret = v
	}
	return t, nil
}
