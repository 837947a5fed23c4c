// Package memory is what agents remember across sessions (docs/memory.md):
// facts the model stores with memory_write (hot memory, pinned into the
// system prompt while they fit memory.hot_memory_chars), markdown notes it
// keeps with the file-memory tools, and finished conversations archived for
// memory_search. Everything is scoped by workspace, agent, subject and end
// user: the service reads and writes one scope at a time, and a row of one
// scope is never returned for another.
package memory

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

// Limits of searches.
const (
	// MaxQueryChars: a longer query is cut to its first MaxQueryChars
	// characters (documented truncation, never an error).
	MaxQueryChars = 1000
	// MaxQueryTerms: the first this many distinct words of a query are
	// searched for.
	MaxQueryTerms = 32
	// maxTermChars: a longer word is cut.
	maxTermChars = 64
	// DefaultSearchLimit and MaxSearchLimit bound a search's results.
	DefaultSearchLimit = 5
	MaxSearchLimit     = 20
	// archiveChars is the most of one archived conversation kept.
	archiveChars = 8000
	// hotCandidates is how many recent facts hot memory looks at.
	hotCandidates = 200
)

// Errors of the service (fault vocabulary: 400 and 404).
var (
	ErrEmptyText  = fault.New(fault.KindInvalid, fault.CodeInvalid, "memory text is required")
	ErrEmptyQuery = fault.New(fault.KindInvalid, fault.CodeInvalid, "a search needs a query with at least one word")
	ErrNotFound   = fault.NotFound("memory not found")
)

// Service reads and writes memories.
type Service struct {
	Store models.MemoryStore
	// Workspace scopes every row (the gateway's workspace root).
	Workspace string
	// HotMemoryChars is memory.hot_memory_chars: the most characters of
	// facts pinned into a prompt, and the most one fact may hold.
	HotMemoryChars int
	// Archive is memory.archive (an agent's memory block may override it).
	Archive bool
	// Dir is the file-memory root (memory.file_memory_dir).
	Dir string
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// New builds the service of a loaded configuration over store.
func New(cfg *config.Loaded, store models.MemoryStore) *Service {
	return &Service{Store: store, Workspace: cfg.Workspace.Root, HotMemoryChars: cfg.Memory.HotMemoryChars,
		Archive: cfg.Memory.Archive, Dir: cfg.MemoryDir()}
}

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now().UTC()
	}
	return time.Now().UTC()
}

func (s *Service) hotCap() int {
	if s.HotMemoryChars > 0 {
		return s.HotMemoryChars
	}
	return config.DefaultHotMemoryChars
}

func (s *Service) scope(sc agent.MemoryScope) models.MemoryScope {
	return models.MemoryScope{Workspace: s.Workspace, AgentID: sc.AgentID, Subject: sc.Subject, UserID: sc.UserID}
}

// UserOf is the memory user of a chat's user id: chat's default user
// (api-user, no user_id given) is the subject's own memory, the one task
// runs and firings use.
func UserOf(userID string) string {
	if userID == "api-user" {
		return ""
	}
	return userID
}

// TooLongError is a memory over memory.hot_memory_chars.
type TooLongError struct{ Chars, Max int }

func (e *TooLongError) Error() string {
	return fmt.Sprintf("memory text is %d characters; at most %d fit (memory.hot_memory_chars)", e.Chars, e.Max)
}

// Fault implements fault.Fault: 400 memory_too_long.
func (e *TooLongError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindInvalid, Code: "memory_too_long", Message: e.Error(),
		Fields: map[string]any{"field": "text", "chars": e.Chars, "max": e.Max}}
}

// Write stores a fact in scope. Errors: ErrEmptyText, *TooLongError.
func (s *Service) Write(ctx context.Context, sc agent.MemoryScope, text string) (*models.MemoryEntry, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, ErrEmptyText
	}
	if n := utf8.RuneCountInString(text); n > s.hotCap() {
		return nil, &TooLongError{Chars: n, Max: s.hotCap()}
	}
	if !utf8.ValidString(text) {
		text = strings.ToValidUTF8(text, "\uFFFD")
	}
	e := &models.MemoryEntry{Workspace: s.Workspace, AgentID: sc.AgentID, Subject: sc.Subject, UserID: sc.UserID,
		Kind: models.MemoryFact, Text: text, Source: sc.Source, CreatedAt: s.now()}
	if err := s.Store.AddMemory(ctx, e); err != nil {
		return nil, err
	}
	return e, nil
}

// ArchiveConversation stores a finished conversation of scope for search
// (cut to its first archiveChars characters). Empty text stores nothing.
func (s *Service) ArchiveConversation(ctx context.Context, sc agent.MemoryScope, text string) error {
	text = strings.TrimSpace(strings.ToValidUTF8(text, "\uFFFD"))
	if text == "" {
		return nil
	}
	if utf8.RuneCountInString(text) > archiveChars {
		text = string([]rune(text)[:archiveChars])
	}
	return s.Store.AddMemory(ctx, &models.MemoryEntry{Workspace: s.Workspace, AgentID: sc.AgentID, Subject: sc.Subject,
		UserID: sc.UserID, Kind: models.MemoryArchive, Text: text, Source: sc.Source, CreatedAt: s.now()})
}

// Terms are the words a query searches for: lower-cased runs of letters
// and digits, distinct, the first MaxQueryTerms of the query's first
// MaxQueryChars characters.
func Terms(query string) []string {
	if utf8.RuneCountInString(query) > MaxQueryChars {
		query = string([]rune(query)[:MaxQueryChars])
	}
	var out []string
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(query), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if utf8.RuneCountInString(w) > maxTermChars {
			w = string([]rune(w)[:maxTermChars])
		}
		if seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
		if len(out) == MaxQueryTerms {
			break
		}
	}
	return out
}

// Search finds the memories of scope (facts and archived conversations)
// that hold words of query, best first; it marks them used. Errors:
// ErrEmptyQuery when the query has no word.
func (s *Service) Search(ctx context.Context, sc agent.MemoryScope, query string, limit int) ([]models.MemoryHit, error) {
	terms := Terms(query)
	if len(terms) == 0 {
		return nil, ErrEmptyQuery
	}
	if limit <= 0 {
		limit = DefaultSearchLimit
	}
	limit = min(limit, MaxSearchLimit)
	hits, err := s.Store.SearchMemories(ctx, s.scope(sc), terms, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	if err := s.Store.TouchMemories(ctx, ids, s.now()); err != nil {
		return nil, err
	}
	return hits, nil
}

// Hot are the facts of scope pinned into a prompt: the most recently used
// (written, or returned by a search) first, as many as fit together in
// HotMemoryChars characters; the first that does not fit and every older
// one are left out (they stay searchable).
func (s *Service) Hot(ctx context.Context, sc agent.MemoryScope) ([]models.MemoryEntry, error) {
	sco := s.scope(sc)
	facts, err := s.Store.ListMemories(ctx, models.MemoryFilter{Workspace: sco.Workspace, AgentID: sco.AgentID, Subject: sco.Subject,
		UserID: sco.UserID, Kind: models.MemoryFact, Limit: hotCandidates})
	if err != nil {
		return nil, err
	}
	budget := s.hotCap()
	for i, f := range facts {
		n := utf8.RuneCountInString(f.Text)
		if n > budget {
			return facts[:i], nil
		}
		budget -= n
	}
	return facts, nil
}

// Filter selects memories for the routes: one agent, a subject ("" every
// subject) and a user ("" with AnyUser: every user).
type Filter = models.MemoryFilter

// List returns the memories f selects in this workspace.
func (s *Service) List(ctx context.Context, f Filter) ([]models.MemoryEntry, error) {
	f.Workspace = s.Workspace
	return s.Store.ListMemories(ctx, f)
}

// Get returns one memory of this workspace (ErrNotFound).
func (s *Service) Get(ctx context.Context, id int64) (*models.MemoryEntry, error) {
	e, err := s.Store.GetMemory(ctx, id)
	if errors.Is(err, models.ErrNotFound) || (err == nil && e.Workspace != s.Workspace) {
		return nil, ErrNotFound
	}
	return e, err
}

// Delete deletes one memory of this workspace (ErrNotFound).
func (s *Service) Delete(ctx context.Context, id int64) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	err := s.Store.DeleteMemory(ctx, id)
	if errors.Is(err, models.ErrNotFound) {
		return ErrNotFound
	}
	return err
}
