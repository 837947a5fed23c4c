// Package chat runs agents for the synchronous surfaces (chat, chat stream,
// inbound webhooks): it resolves the agent and its settings, keeps the
// session history, drives the agent loop in-process through the single LLM
// router call site, and records the action log and feedback.
package chat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/memory"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/models"
)

// historyLimit bounds how many earlier messages are sent with a turn.
const historyLimit = 50

// Service runs agents in-process.
type Service struct {
	Config  *config.Loaded
	Agents  *agentdef.Registry
	Router  *llm.Router
	Store   models.ChatStore
	Toolbox *agent.Toolbox
	// Memory archives the finished exchanges of agents with memory (nil:
	// none); the toolbox's Memory pins and runs the rest.
	Memory *memory.Service

	locks sessionLocks
}

// Request is one message to an agent.
type Request struct {
	AgentID   string
	Text      string
	UserID    string
	Username  string
	SessionID string // optional: continue this session
	// CreateSession lets SessionID name a session that does not exist yet
	// (webhook thread and explicit session ids, scheduled firings); an
	// existing one must still belong to the same agent and subject.
	CreateSession bool
	// NewSession: SessionID is a fresh server-issued id (the
	// OpenAI-compatible endpoint's and the MCP server's session per call),
	// so there is no stored session to look up or check.
	NewSession bool
	Overrides  *Overrides
	// Source is chat, stream or webhook (the ledger's feature).
	Source string
	// Metadata is stored on the action-log row (webhook include_raw).
	Metadata map[string]any
	// Interactive marks surfaces a person waits on (confirmation applies).
	Interactive bool
	ConfirmCost bool
	// RunID and ResponseID, when set, are the ids the run gets (NewRunIDs);
	// the stream handler assigns them first to send them as headers.
	RunID      string
	ResponseID string
	// History, when not nil, is the conversation the turn continues, as the
	// caller sent it (the OpenAI-compatible endpoint's earlier messages),
	// instead of the session's stored one.
	History []llm.Message
}

// NewRunIDs returns a fresh run id and response id.
func NewRunIDs() (runID, responseID string) { return compactUUID("run_"), compactUUID("resp_") }

// SessionOf is the session a prepared request runs in: the one it names, or
// the server-issued id of its caller, agent and user.
func SessionOf(ctx context.Context, req *Request) string {
	if req.SessionID != "" {
		return req.SessionID
	}
	prefix := "http-"
	if req.Source == llm.SourceWebhook {
		prefix = "webhook-" + req.AgentID + "-"
	}
	return SessionIDFor(prefix, subjectOf(ctx), req.AgentID, req.UserID)
}

// Reply is the answer of a run.
type Reply struct {
	Reply      string               `json:"reply"`
	SessionID  string               `json:"session_id"`
	RunID      string               `json:"run_id"`
	ResponseID string               `json:"response_id"`
	Usage      llm.Usage            `json:"-"`
	Files      []agent.ProducedFile `json:"-"`
	StopReason string               `json:"-"`
}

// SessionIDFor is the server-issued HTTP session id of a caller's user key
// with an agent: stable (a follow-up continues the conversation), scoped to
// the authenticated subject, and not revealing the user id.
func SessionIDFor(prefix, subject, agentID, userID string) string {
	h := sha256.Sum256([]byte(subject + "\x00" + agentID + "\x00" + userID))
	return prefix + hex.EncodeToString(h[:12])
}

// Prepare validates a request before anything is stored or sent, so that
// streaming handlers can answer 4xx before they start the stream.
func (s *Service) Prepare(ctx context.Context, req *Request) (*agentdef.Definition, Settings, error) {
	req.AgentID = strings.TrimSpace(req.AgentID)
	if req.AgentID == "" {
		return nil, Settings{}, invalid("agent_id", "is required")
	}
	if strings.TrimSpace(req.Text) == "" {
		return nil, Settings{}, invalid("text", "is required")
	}
	if req.UserID == "" {
		req.UserID = "api-user"
	}
	if req.Username == "" {
		req.Username = req.UserID
	}
	def, ok := s.Agents.Get(req.AgentID)
	if !ok {
		return nil, Settings{}, fmt.Errorf("%w: %s", ErrAgentNotFound, req.AgentID)
	}
	if !def.IsEnabled() {
		return nil, Settings{}, fmt.Errorf("%w: %s", ErrAgentDisabled, req.AgentID)
	}
	if p := auth.FromContext(ctx); !p.MayUseAgent(def.ID) {
		// auth.keys[].agents: the key is limited to other agents.
		return nil, Settings{}, &fault.Forbidden{Code: fault.CodeForbidden, Msg: fmt.Sprintf("this key may not use agent %s", def.ID)}
	}
	set, err := Resolve(&s.Config.Config, s.Router, def, s.Toolbox.Tools(def), req.Overrides, auth.FromContext(ctx))
	if err != nil {
		return nil, Settings{}, err
	}
	if req.SessionID != "" && !req.NewSession {
		sess, err := s.Store.GetSession(ctx, req.SessionID)
		if errors.Is(err, models.ErrNotFound) && req.CreateSession {
			// A caller-named session (webhook thread) starts here.
			return def, set, nil
		}
		if errors.Is(err, models.ErrNotFound) || (err == nil && (sess.AgentID != def.ID || sess.Subject != subjectOf(ctx))) {
			return nil, Settings{}, fmt.Errorf("%w: %s", ErrSessionNotFound, req.SessionID)
		}
		if err != nil {
			return nil, Settings{}, err
		}
	}
	return def, set, nil
}

func subjectOf(ctx context.Context) string {
	if p := auth.FromContext(ctx); p != nil {
		return p.Subject
	}
	return "anonymous"
}

// Chat runs the agent for one message. onDelta, when set, receives text as
// it streams from the provider. The conversation is stored only when the
// run succeeds; the action log records failures too.
func (s *Service) Chat(ctx context.Context, req Request, onDelta func(string) error) (*Reply, error) {
	def, set, err := s.Prepare(ctx, &req)
	if err != nil {
		return nil, err
	}
	subject := subjectOf(ctx)
	sessionID := SessionOf(ctx, &req)
	unlock, err := s.locks.lock(ctx, sessionID)
	if err != nil {
		// The caller left (or its deadline passed) while an earlier chat of
		// the session ran: it never reaches the provider.
		return nil, fmt.Errorf("waiting for the session's earlier request: %w", err)
	}
	defer unlock()
	history := req.History
	if history == nil {
		if history, err = s.history(ctx, sessionID); err != nil {
			return nil, err
		}
	}
	runID, responseID := req.RunID, req.ResponseID
	if runID == "" || responseID == "" {
		runID, responseID = NewRunIDs()
	}
	started := time.Now().UTC()
	scope := agent.MemoryScope{AgentID: def.ID, Subject: subject, UserID: memory.UserOf(req.UserID), Source: sessionID}
	system, err := s.Toolbox.SystemPromptWithMemory(ctx, def, true, scope)
	if err != nil {
		return nil, fmt.Errorf("read the agent's memory: %w", err)
	}
	// The exchange is saved below through the same writer before the reply
	// is sent, so the LLM calls' settlements need not wait for their own
	// commit (models.CommitLater).
	set = s.withPeerTools(def, set)
	ex := &inProcess{ctx: agent.WithMemoryScope(models.CommitLater(ctx), scope), svc: s, def: def, set: set, onDelta: onDelta,
		scope: scope, deleg: rootDelegation(def, runID),
		meta: llm.CallMeta{Subject: auth.FromContext(ctx).CostSubject(req.UserID), Workspace: s.Config.Workspace.Root, AgentID: def.ID, SessionID: sessionID, RunID: runID,
			Source: req.Source, Trigger: triggerOf(req.Source), DataClassification: def.LLM.DataClassification, Interactive: req.Interactive, ConfirmCost: req.ConfirmCost}}
	defer s.Store.FlushLater(detached.Context(ex.ctx)) // nothing left once the exchange is saved
	out, runErr := agent.Run(ex, agent.Input{
		Provider: set.Provider, Model: set.Model, SystemPrompt: s.Toolbox.WithKnowledge(ctx, def, system, req.Text, ex.meta), History: history, UserText: req.Text,
		Tools: set.Tools, ToolChoice: set.ToolChoice, Temperature: set.Temperature, MaxTokens: set.MaxTokens, MaxTurns: set.MaxTurns, PromptCaching: set.Caching,
	})
	finished := time.Now().UTC()
	if runErr == nil && ctx.Err() != nil {
		// The caller went away while the answer was produced: nobody saw
		// it, so it is not part of the conversation (the ledger still
		// records what the provider served).
		runErr = ctx.Err()
	}
	var run *models.AgentRun
	if s.Config.Runtime.ActionLog.Enabled {
		run = &models.AgentRun{RunID: runID, ResponseID: responseID, AgentID: def.ID, SessionID: sessionID, Subject: subject,
			Source: req.Source, Provider: set.Provider, Model: set.Model, Status: "finished", StartedAt: started, FinishedAt: &finished,
			Metadata: metadataJSON(req.Metadata)}
		if out != nil {
			run.Turns, run.InputTokens, run.OutputTokens = out.Turns, out.Usage.InputTokens, out.Usage.OutputTokens
		}
		if runErr != nil {
			run.Status, run.Error = "failed", runErr.Error()
			if errors.Is(runErr, context.Canceled) {
				run.Status = "cancelled"
			}
		}
	}
	// The conversation is kept only when the run succeeded; the action log
	// records failures too. Stored even when the caller went away.
	var msgs []models.ChatMessage
	if runErr == nil {
		msgs = toRows(runID, out.NewMessages)
	}
	sess := &models.ChatSession{ID: sessionID, AgentID: def.ID, Subject: subject, UserID: req.UserID, Username: req.Username, Source: req.Source}
	// ex.ctx: on PostgreSQL the exchange carries the settlements it holds.
	if err := s.Store.SaveExchange(detached.Context(ex.ctx), sess, run, msgs); err != nil && runErr == nil {
		return nil, err
	}
	if runErr != nil {
		return nil, runErr
	}
	s.archive(ctx, def, scope, req.Text, out.Reply)
	return &Reply{Reply: out.Reply, SessionID: sessionID, RunID: runID, ResponseID: responseID, Usage: out.Usage, Files: out.Files, StopReason: out.StopReason}, nil
}

// History is the recent conversation of a session as a run continues it
// (asynchronous webhook runs load it once, when they start).
func (s *Service) History(ctx context.Context, sessionID string) ([]llm.Message, error) {
	return s.history(ctx, sessionID)
}

// history loads the recent conversation, starting at a user message so a
// cut never separates tool results from the call that asked for them.
func (s *Service) history(ctx context.Context, sessionID string) ([]llm.Message, error) {
	rows, err := s.Store.RecentMessages(ctx, sessionID, historyLimit)
	if err != nil {
		return nil, fmt.Errorf("load conversation: %w", err)
	}
	for len(rows) > 0 && rows[0].Role != llm.RoleUser {
		rows = rows[1:]
	}
	msgs := make([]llm.Message, 0, len(rows))
	for _, r := range rows {
		m := llm.Message{Role: r.Role, Content: r.Content, ToolCallID: r.ToolCallID, Name: r.Name}
		if r.ToolCalls != "" {
			_ = json.Unmarshal([]byte(r.ToolCalls), &m.ToolCalls)
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}

func toRows(runID string, msgs []llm.Message) []models.ChatMessage {
	rows := make([]models.ChatMessage, 0, len(msgs))
	for _, m := range msgs {
		row := models.ChatMessage{RunID: runID, Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, Name: m.Name}
		if len(m.ToolCalls) > 0 {
			b, _ := json.Marshal(m.ToolCalls)
			row.ToolCalls = string(b)
		}
		rows = append(rows, row)
	}
	return rows
}

func metadataJSON(m map[string]any) string {
	if len(m) == 0 {
		return ""
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// compactUUID is a time-ordered UUID (version 7: a millisecond timestamp,
// then 74 random bits) without dashes. Run and response ids, and the call
// ids made from them, are keys of the action log's and the cost ledger's
// indexes: ids that grow with time are appended at the right edge of those
// B-trees, so a batch of the group commit writes a few index pages instead
// of one random page per row and index, and the cost does not grow with the
// tables.
//
// It is returned after prefix, in one allocation (two ids per chat request).
func compactUUID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	var digits [32]byte
	hex.Encode(digits[:], id[:])
	var b strings.Builder
	b.Grow(len(prefix) + len(digits))
	b.WriteString(prefix)
	b.Write(digits[:])
	return b.String()
}

// inProcess executes loop steps directly: LLM turns through the router
// (admission and settlement included), tools in the session work dir.
type inProcess struct {
	ctx     context.Context
	svc     *Service
	def     *agentdef.Definition
	set     Settings
	onDelta func(string) error
	meta    llm.CallMeta
	scope   agent.MemoryScope
	// deleg: the run's delegation state when its agent has peers (peers.go).
	deleg *chatDelegation
}

// workDir is the session's work directory, where its tools run. Worked
// out when a tool runs, not for every exchange (most call no tool).
func (e *inProcess) workDir() string {
	return filepath.Join(e.svc.Config.Workspace.SessionsDir(), e.meta.SessionID)
}

func (e *inProcess) CallLLM(t agent.TurnRequest) (*llm.Response, error) {
	call := &llm.Call{Provider: t.Provider, Model: t.Request.Model, Request: t.Request, Meta: e.meta}
	call.Meta.CallID = e.meta.RunID + "-t" + strconv.Itoa(t.Turn)
	// A provider may echo a configured secret (its own key) in a successful
	// reply: the streamed deltas and the answer are scrubbed here, before the
	// caller, the loop and the stored exchange see them (the ledger is
	// settled inside Do and holds no text).
	var st *scrub.Stream
	if e.onDelta != nil {
		st = scrub.NewStream(e.onDelta)
		call.Stream = true
		call.OnDelta = st.Write
	}
	resp, err := e.svc.Router.Do(e.ctx, call)
	if err != nil {
		if st != nil {
			// What streamed before the failure reaches the caller (and
			// starts the stream, so the failure is an error frame), less
			// an end that could be half a secret.
			_ = st.Cut()
		}
		return resp, err
	}
	if st != nil {
		// The held-back end of the stream: the text is complete.
		if err := st.Flush(); err != nil {
			return nil, err
		}
	}
	return agent.ScrubResponse(resp), nil
}

func (e *inProcess) CallTool(inv agent.ToolInvocation) (agent.ToolResult, error) {
	if _, ok := agentdef.PeerOfTool(inv.Call.Name); ok && e.deleg != nil {
		return e.delegate(inv)
	}
	if e.def.Approvals.Needs(inv.Call.Name) {
		// Only durable runs can park for a person's decision.
		return agent.ApprovalRefusedInChat(inv.Call.Name), nil
	}
	// A key per call (docs/tools.md, "Idempotency keys"): from the
	// exchange's run id, so a client that retries the request starts a new
	// exchange and gets new keys; nothing here is retried on its own.
	ctx := drivers.WithIdempotencyKey(e.ctx, agent.IdempotencyKey("chat/"+e.meta.RunID, inv.Turn, inv.Index, inv.Call.ID))
	res, err := e.svc.Toolbox.Execute(ctx, e.workDir(), e.def.ToolGrants(), inv.Call)
	var unreachable *mcp.TransportError
	if errors.As(err, &unreachable) {
		// In chat there is no durable retry: the model hears about it.
		return agent.ToolResult{Content: err.Error(), IsError: true}, nil
	}
	return res, err
}

// triggerOf is the ledger's trigger of a call made here: what started the
// run. An inbound webhook answered synchronously was started by the
// webhook (the spec's webhook trigger), like its asynchronous runs
// (activities/webhookrun.go); everything else here by an API call.
func triggerOf(source string) string {
	if source == llm.SourceWebhook {
		return "webhook"
	}
	return "api"
}
