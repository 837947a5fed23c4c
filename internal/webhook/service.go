package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/models"
)

// Errors the API maps to status codes.
var (
	// ErrNotWebhookAgent: the agent exists but its trigger is not webhook
	// (404, like an unknown agent: the route does not exist for it).
	ErrNotWebhookAgent = errors.New("agent does not accept webhooks (its trigger is not webhook)")
	// ErrIdempotencyKeyReused: the key was used with a different body (409).
	ErrIdempotencyKeyReused = errors.New("Idempotency-Key was already used with a different body")
	// ErrIdempotencyInProgress: the first request with the key is still
	// running after the wait (409).
	ErrIdempotencyInProgress = errors.New("a request with this Idempotency-Key is still running; retry later")
)

// InvalidError is bad input (400), naming what.
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// DefaultUserID is the user of a payload without user_id_path (or where it
// yields nothing).
const DefaultUserID = "webhook"

// Defaults of the idempotency store.
const (
	// IdempotencyTTL is how long a key's reply is kept (24 h).
	IdempotencyTTL = 24 * time.Hour
	// claimStaleAfter: a claim still running after this long belongs to a
	// process that died; a repeat may take it over.
	claimStaleAfter = 15 * time.Minute
	// defaultWait is how long a concurrent repeat waits for the first.
	defaultWait = 2 * time.Minute
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
	Agents *agent.Registry
	Store  *models.Store
	// Wait bounds how long a repeat waits for a concurrent first request
	// with the same Idempotency-Key (default 2 minutes).
	Wait time.Duration
	// Poll is how often a waiting repeat looks (default 100ms).
	Poll time.Duration

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
	def, ok := s.Agents.Get(req.AgentID)
	if !ok {
		return nil, false, fmt.Errorf("%w: %s", chat.ErrAgentNotFound, req.AgentID)
	}
	if def.Trigger != agent.TriggerWebhook {
		return nil, false, fmt.Errorf("%w: %s", ErrNotWebhookAgent, req.AgentID)
	}
	mapped, err := Map(req.Body, def.Webhook)
	if err != nil {
		if errors.Is(err, ErrNotJSON) {
			return nil, false, err
		}
		return nil, false, &InvalidError{Field: "agent " + def.ID, Msg: err.Error()}
	}
	creq, err := s.chatRequest(def, mapped)
	if err != nil {
		return nil, false, err
	}
	key := strings.TrimSpace(req.IdempotencyKey)
	if key == "" {
		r, err := s.run(ctx, creq, mapped)
		return r, false, err
	}
	if len(key) > MaxIdempotencyKey {
		return nil, false, &InvalidError{Field: "Idempotency-Key", Msg: fmt.Sprintf("is longer than %d characters", MaxIdempotencyKey)}
	}
	return s.once(ctx, def.ID, key, mapped, creq)
}

// chatRequest builds the chat request of a mapped payload.
func (s *Service) chatRequest(def *agent.Definition, m *Mapped) (chat.Request, error) {
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
			return req, &InvalidError{Field: "session id (webhook.session_id_path)", Msg: "must be 1-191 letters, digits, _, . or - and not start with ."}
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

// once runs the request at most once per (subject, agent, key) within
// IdempotencyTTL. The claim is a row insert, so of concurrent repeats one
// runs and the others wait for its reply. A failed run releases the key:
// errors are not replayed, a retry runs again.
func (s *Service) once(ctx context.Context, agentID, key string, m *Mapped, req chat.Request) (*Reply, bool, error) {
	s.maybePurge(ctx)
	subject := "anonymous"
	if p := auth.FromContext(ctx); p != nil {
		subject = p.Subject
	}
	digest := sha256.Sum256([]byte(subject + "\x00" + agentID + "\x00" + key))
	bodySum := sha256.Sum256([]byte(m.Raw))
	rec := &models.WebhookIdempotency{Key: hex.EncodeToString(digest[:]), AgentID: agentID, BodyHash: hex.EncodeToString(bodySum[:])}
	wait, poll := s.Wait, s.Poll
	if wait <= 0 {
		wait = defaultWait
	}
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	deadline := time.Now().Add(wait)
	for {
		rec.ExpiresAt = time.Now().UTC().Add(IdempotencyTTL)
		have, claimed, err := s.Store.ClaimIdempotency(ctx, rec, claimStaleAfter)
		if err != nil {
			return nil, false, err
		}
		if claimed {
			return s.runClaimed(ctx, rec.Key, req, m)
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
		// The first request is still running: wait for it.
		if time.Now().After(deadline) {
			return nil, false, ErrIdempotencyInProgress
		}
		select {
		case <-ctx.Done():
			return nil, false, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func (s *Service) runClaimed(ctx context.Context, key string, req chat.Request, m *Mapped) (*Reply, bool, error) {
	r, err := s.run(ctx, req, m)
	// Record the outcome even if the caller went away.
	bg := context.WithoutCancel(ctx)
	if err != nil {
		_ = s.Store.ReleaseIdempotency(bg, key)
		return nil, false, err
	}
	data, _ := json.Marshal(r)
	if err := s.Store.CompleteIdempotency(bg, key, string(data)); err != nil {
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
		_, _ = s.Store.PurgeIdempotency(context.WithoutCancel(ctx))
	}
}
