package webhook

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Errors of a webhook request, in the fault vocabulary (the API maps them).
var (
	// ErrNotWebhookAgent: the agent exists but its trigger is not webhook
	// (404, like an unknown agent: the route does not exist for it).
	ErrNotWebhookAgent = fault.NotFound("agent does not accept webhooks (its trigger is not webhook)")
	// ErrIdempotencyKeyReused: the key was used with a different body (409).
	ErrIdempotencyKeyReused = fault.Conflict("idempotency_key_reused", "Idempotency-Key was already used with a different body")
	// ErrIdempotencyInProgress: the first request with the key is still
	// running (409 with Retry-After, at once; see InProgressError, which
	// carries the actual wait).
	ErrIdempotencyInProgress = &fault.Error{Kind: fault.KindConflict, Code: "idempotency_key_in_progress", RetryAfter: 5 * time.Second,
		Msg: "a request with this Idempotency-Key is still running; retry after Retry-After seconds"}
)

// DefaultUserID is the user of a payload without user_id_path (or where it
// yields nothing).
const DefaultUserID = "webhook"

// Defaults of the idempotency store.
const (
	// IdempotencyTTL is how long a key's reply is kept (24 h).
	IdempotencyTTL = 24 * time.Hour
	// DefaultClaimLease is how long a running request's claim on its key
	// stands without renewal. The owner renews it every third of that while
	// it runs, so a claim outlives its lease only when its process died (or
	// its database stalled that long): the next repeat takes it over.
	DefaultClaimLease = 10 * time.Second
	// MaxIdempotencyKey bounds the header's length.
	MaxIdempotencyKey = 255
)

// Reply is the webhook response: the spec's reply, session_id, thread_id
// and user_id, plus the run ids feedback needs.
type Reply struct {
	Reply      string `json:"reply"`
	SessionID  string `json:"session_id"`
	ThreadID   string `json:"thread_id"`
	UserID     string `json:"user_id"`
	RunID      string `json:"run_id,omitempty"`
	ResponseID string `json:"response_id,omitempty"`
}

// Service runs inbound webhooks.
type Service struct {
	Chat   *chat.Service
	Agents *agentdef.Registry
	Store  models.WebhookStore
	// ClaimLease: see DefaultClaimLease.
	ClaimLease time.Duration
	// Temporal and TaskQueue start asynchronous runs (?async=true).
	Temporal  client.Client
	TaskQueue string

	purgeMu   sync.Mutex
	lastPurge time.Time
}

// Request is one inbound call.
type Request struct {
	AgentID string
	Body    []byte
	// IdempotencyKey is the optional Idempotency-Key header.
	IdempotencyKey string
}

// Handle maps the payload and runs the agent. replayed is true when the
// reply is the stored one of an earlier request with the same
// Idempotency-Key (the agent did not run again).
func (s *Service) Handle(ctx context.Context, req Request) (reply *Reply, replayed bool, err error) {
	def, mapped, creq, err := s.prepare(req)
	if err != nil {
		return nil, false, err
	}
	key := strings.TrimSpace(req.IdempotencyKey)
	if key == "" {
		r, err := s.run(ctx, creq, mapped)
		return r, false, err
	}
	if len(key) > MaxIdempotencyKey {
		return nil, false, &fault.Invalid{Field: "Idempotency-Key", Msg: fmt.Sprintf("is longer than %d characters", MaxIdempotencyKey)}
	}
	return s.once(ctx, def.ID, key, mapped, creq)
}

// prepare finds the webhook agent and maps the payload into its chat
// request.
func (s *Service) prepare(req Request) (*agentdef.Definition, *Mapped, chat.Request, error) {
	def, ok := s.Agents.Get(req.AgentID)
	if !ok {
		return nil, nil, chat.Request{}, fmt.Errorf("%w: %s", chat.ErrAgentNotFound, req.AgentID)
	}
	if def.Trigger != agentdef.TriggerWebhook {
		return nil, nil, chat.Request{}, fmt.Errorf("%w: %s", ErrNotWebhookAgent, req.AgentID)
	}
	mapped, err := Map(req.Body, def.Webhook)
	if err != nil {
		if errors.Is(err, ErrNotJSON) {
			return nil, nil, chat.Request{}, err
		}
		return nil, nil, chat.Request{}, &fault.Invalid{Field: "agent " + def.ID, Msg: err.Error()}
	}
	creq, err := s.chatRequest(def, mapped)
	return def, mapped, creq, err
}

// chatRequest builds the chat request of a mapped payload.
func (s *Service) chatRequest(def *agentdef.Definition, m *Mapped) (chat.Request, error) {
	userID := m.UserID
	if userID == "" {
		userID = DefaultUserID
	}
	req := chat.Request{AgentID: def.ID, Text: m.Text, UserID: userID, Username: m.Username, Source: llm.SourceWebhook,
		Metadata: map[string]any{"trigger": "webhook", "text_from": m.TextFrom}}
	if m.ThreadID != "" {
		req.Metadata["thread_id"] = m.ThreadID
	}
	if def.Webhook != nil && def.Webhook.IncludeRaw {
		req.Metadata["raw"] = json.RawMessage(m.Raw)
	}
	switch {
	case m.SessionID != "":
		if !safeSessionID.MatchString(m.SessionID) {
			return req, &fault.Invalid{Field: "session id (webhook.session_id_path)", Msg: "must be 1-191 letters, digits, _, . or - and not start with ."}
		}
		req.SessionID, req.CreateSession = m.SessionID, true
	case m.ThreadID != "":
		req.SessionID, req.CreateSession = ThreadSessionID(def.ID, m.ThreadID), true
	}
	return req, nil
}

var (
	safeSessionID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,190}$`)
	safeThread    = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
	unsafeRun     = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
)

// ThreadSessionID is the session of a thread: webhook-<agent_id>-<thread_id>.
// Session ids name directories, so a thread id with characters outside
// [A-Za-z0-9_.-] (or longer than 100) is written with those replaced by _
// and a short digest of the original appended, keeping distinct threads
// apart: "owner/repo#12" -> webhook-a-owner_repo_12-<12 hex>.
func ThreadSessionID(agentID, threadID string) string {
	if safeThread.MatchString(threadID) && !strings.HasPrefix(threadID, ".") {
		return "webhook-" + agentID + "-" + threadID
	}
	clean := unsafeRun.ReplaceAllString(threadID, "_")
	if len(clean) > 64 {
		clean = clean[:64]
	}
	sum := sha256.Sum256([]byte(threadID))
	return "webhook-" + agentID + "-" + clean + "-" + hex.EncodeToString(sum[:6])
}

func (s *Service) run(ctx context.Context, req chat.Request, m *Mapped) (*Reply, error) {
	out, err := s.Chat.Chat(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	return &Reply{Reply: out.Reply, SessionID: out.SessionID, ThreadID: m.ThreadID, UserID: req.UserID, RunID: out.RunID, ResponseID: out.ResponseID}, nil
}

// InProgressError: a repeat met the live claim of a request with the same
// Idempotency-Key. It is answered at once (409) with RetryAfter, by when the
// first request has finished or renewed its claim.
type InProgressError struct{ RetryAfter time.Duration }

func (e *InProgressError) Error() string { return ErrIdempotencyInProgress.Error() }

// Unwrap makes errors.Is(err, ErrIdempotencyInProgress) hold.
func (e *InProgressError) Unwrap() error { return ErrIdempotencyInProgress }

// Fault implements fault.Fault: ErrIdempotencyInProgress with this wait.
func (e *InProgressError) Fault() fault.Detail {
	d := ErrIdempotencyInProgress.Fault()
	d.RetryAfter = e.RetryAfter
	return d
}

// once runs the request at most once per (subject, agent, key) within
// IdempotencyTTL. The claim is a row insert, so of concurrent repeats one
// runs; the others are told at once to retry (InProgressError) and, once the
// first has finished, get its reply. A failed run releases the key: errors
// are not replayed, a retry runs again. The claim carries this request as
// its owner and a short lease renewed while it runs, so the claim of a
// process that died is taken over within one lease.
func (s *Service) once(ctx context.Context, agentID, key string, m *Mapped, req chat.Request) (*Reply, bool, error) {
	s.maybePurge(ctx)
	subject := "anonymous"
	if p := auth.FromContext(ctx); p != nil {
		subject = p.Subject
	}
	digest := sha256.Sum256([]byte(subject + "\x00" + agentID + "\x00" + key))
	bodySum := sha256.Sum256([]byte(m.Raw))
	lease := s.lease()
	rec := &models.WebhookIdempotency{Key: hex.EncodeToString(digest[:]), AgentID: agentID, BodyHash: hex.EncodeToString(bodySum[:]),
		Owner: newOwner(), ExpiresAt: time.Now().UTC().Add(IdempotencyTTL)}
	have, claimed, err := s.Store.ClaimIdempotency(ctx, rec, lease)
	if err != nil {
		return nil, false, err
	}
	if claimed {
		return s.runClaimed(ctx, rec, lease, req, m)
	}
	if have.BodyHash != rec.BodyHash {
		return nil, false, ErrIdempotencyKeyReused
	}
	if have.Status == models.IdempotencyDone {
		var r Reply
		if err := json.Unmarshal([]byte(have.Response), &r); err != nil {
			return nil, false, fmt.Errorf("stored reply of Idempotency-Key: %w", err)
		}
		return &r, true, nil
	}
	// The first request is still running (its lease is live).
	wait := time.Until(have.LeaseUntil)
	if wait < time.Second {
		wait = time.Second
	}
	if wait > lease {
		wait = lease
	}
	return nil, false, &InProgressError{RetryAfter: wait}
}

func (s *Service) lease() time.Duration {
	if s.ClaimLease > 0 {
		return s.ClaimLease
	}
	return DefaultClaimLease
}

// newOwner names one request's claim: the process id (to tell processes
// apart when reading the table) and a random part (requests apart).
func newOwner() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
}

func (s *Service) runClaimed(ctx context.Context, rec *models.WebhookIdempotency, lease time.Duration, req chat.Request, m *Mapped) (*Reply, bool, error) {
	// Record the outcome, and keep the claim alive, even if the caller went away.
	bg := detached.Context(ctx)
	stop := make(chan struct{})
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				// A failed renewal is retried at the next tick; a claim
				// taken over meanwhile is simply not ours to finish.
				_, _ = s.Store.RenewIdempotency(bg, rec.Key, rec.Owner, lease)
			}
		}
	}()
	r, err := s.run(ctx, req, m)
	close(stop)
	<-renewed
	if err != nil {
		_ = s.Store.ReleaseIdempotency(bg, rec.Key, rec.Owner)
		return nil, false, err
	}
	data, _ := json.Marshal(r)
	if err := s.Store.CompleteIdempotency(bg, rec.Key, rec.Owner, string(data)); err != nil {
		return nil, false, err
	}
	return r, false, nil
}

// maybePurge deletes expired keys at most once an hour.
func (s *Service) maybePurge(ctx context.Context) {
	s.purgeMu.Lock()
	due := time.Since(s.lastPurge) > time.Hour
	if due {
		s.lastPurge = time.Now()
	}
	s.purgeMu.Unlock()
	if due {
		_, _ = s.Store.PurgeIdempotency(detached.Context(ctx))
	}
}
