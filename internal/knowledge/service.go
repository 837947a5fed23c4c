// Package knowledge is knowledge bases (docs/knowledge.md): the bases of
// config.yaml (knowledge.bases.<id>) and the sources added through the
// API expand into documents; each document is indexed by a
// KnowledgeIngest workflow (workflows/knowledgeingest.go) whose steps are
// methods of Service (extract, chunk, embed a batch, publish); retrieval
// searches the vector store (hybrid: full text plus similarity) and hands
// the passages to the model before a turn and through the
// knowledge_search tool.
package knowledge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/embedding"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Errors the API maps.
var (
	ErrBaseNotFound = fault.NotFound("no such knowledge base")
	ErrInvalid      = &fault.Error{Kind: fault.KindInvalid, Code: fault.CodeInvalid, Msg: "invalid knowledge request"}
	ErrNotEnabled   = fault.NotEnabled("knowledge bases need a vector store and an embedding model (knowledge.embedding)")
)

// MaxQueryChars is the longest query searched; a longer one is cut to it
// (documented truncation).
const MaxQueryChars = 2000

// Service is knowledge bases.
type Service struct {
	Config *config.KnowledgeConfig
	// Workspace is the folder relative sources are read from.
	Workspace string
	Store     models.KnowledgeStore
	Vectors   vector.Store
	// Embedder embeds chunks and queries (nil: documents fail with a
	// reason, searches are full text only).
	Embedder  embedding.Embedder
	Temporal  client.Client
	TaskQueue string
	// SSRF guards URL sources (runtime.ssrf).
	SSRF netguard.Policy
	// BudgetWait bounds an ingestion's waits for budget
	// (costs.run_budget_wait).
	BudgetWait time.Duration
	Log        *slog.Logger
	// FetchTimeout bounds one URL download (0: a minute).
	FetchTimeout time.Duration
}

// Base is a knowledge base with its documents' status.
type Base struct {
	ID          string   `json:"id"`
	Description string   `json:"description,omitempty"`
	Sources     []string `json:"sources"`
	// Status is indexing while any document is queued or indexing, ready
	// otherwise (failed documents are counted in Failed), empty without
	// documents.
	Status    string `json:"status"`
	Documents int    `json:"documents"`
	Queued    int    `json:"queued"`
	Indexing  int    `json:"indexing"`
	Ready     int    `json:"ready"`
	Failed    int    `json:"failed"`
	Chunks    int    `json:"chunks"`
}

func (s *Service) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// IDs are the configured bases, sorted.
func (s *Service) IDs() []string {
	if s == nil || s.Config == nil {
		return nil
	}
	ids := make([]string, 0, len(s.Config.Bases))
	for id := range s.Config.Bases {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Has reports whether base is configured.
func (s *Service) Has(base string) bool {
	if s == nil || s.Config == nil {
		return false
	}
	_, ok := s.Config.Bases[base]
	return ok
}

// Description is a base's description.
func (s *Service) Description(base string) string {
	if !s.Has(base) {
		return ""
	}
	return s.Config.Bases[base].Description
}

// sources are a base's config sources then those added through the API.
func (s *Service) sources(ctx context.Context, base string) ([]string, error) {
	out := slices.Clone(s.Config.Bases[base].Sources)
	added, err := s.Store.ListKnowledgeSources(ctx, base)
	if err != nil {
		return nil, err
	}
	for _, a := range added {
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// Bases lists every base with its status.
func (s *Service) Bases(ctx context.Context) ([]Base, error) {
	var out []Base
	for _, id := range s.IDs() {
		b, err := s.Base(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *b)
	}
	return out, nil
}

// Base is one base with its status (ErrBaseNotFound).
func (s *Service) Base(ctx context.Context, id string) (*Base, error) {
	if !s.Has(id) {
		return nil, fmt.Errorf("%w: %q", ErrBaseNotFound, id)
	}
	docs, err := s.Documents(ctx, id)
	if err != nil {
		return nil, err
	}
	srcs, err := s.sources(ctx, id)
	if err != nil {
		return nil, err
	}
	b := &Base{ID: id, Description: s.Config.Bases[id].Description, Sources: srcs, Documents: len(docs)}
	for _, d := range docs {
		switch d.Status {
		case models.KnowledgeQueued:
			b.Queued++
		case models.KnowledgeIndexing:
			b.Indexing++
		case models.KnowledgeReady:
			b.Ready++
			b.Chunks += d.Chunks
		case models.KnowledgeFailed:
			b.Failed++
		}
	}
	switch {
	case len(docs) == 0:
		b.Status = "empty"
	case b.Queued+b.Indexing > 0:
		b.Status = models.KnowledgeIndexing
	case b.Ready == 0:
		b.Status = models.KnowledgeFailed
	default:
		b.Status = models.KnowledgeReady
	}
	return b, nil
}

// Documents lists a base's documents; rows still queued or indexing are
// first reconciled with Temporal (one whose workflow ended without
// recording a result is failed, so nothing stays indexing).
func (s *Service) Documents(ctx context.Context, base string) ([]models.KnowledgeDocument, error) {
	if !s.Has(base) {
		return nil, fmt.Errorf("%w: %q", ErrBaseNotFound, base)
	}
	docs, err := s.Store.ListKnowledgeDocuments(ctx, base)
	if err != nil {
		return nil, err
	}
	for i := range docs {
		if !docs[i].Final() {
			if d, err := s.reconcile(ctx, &docs[i]); err == nil && d != nil {
				docs[i] = *d
			}
		}
	}
	return docs, nil
}

// reconcileGrace is how long a queued row may wait for its workflow
// before a missing one counts as lost.
const reconcileGrace = 30 * time.Second

// reconcile checks a non-final row against its workflow: a workflow that
// ended leaves the row failed (it recorded nothing, or the row would be
// final); a queued row without a workflow is started again.
func (s *Service) reconcile(ctx context.Context, d *models.KnowledgeDocument) (*models.KnowledgeDocument, error) {
	if s.Temporal == nil || d.WorkflowID == "" {
		return nil, nil
	}
	desc, err := s.Temporal.DescribeWorkflowExecution(ctx, d.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		if time.Since(d.UpdatedAt) < reconcileGrace {
			return nil, nil
		}
		if err := s.start(ctx, d.ID); err != nil {
			return nil, err
		}
		return nil, nil
	case err != nil:
		return nil, err
	}
	st := desc.GetWorkflowExecutionInfo().GetStatus()
	if st == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return nil, nil
	}
	// Give the workflow's own last step the benefit of a race: read again.
	cur, err := s.Store.GetKnowledgeDocument(ctx, d.ID)
	if err != nil || cur.Final() {
		return cur, err
	}
	reason := "the ingestion ended (" + strings.ToLower(strings.TrimPrefix(st.String(), "WORKFLOW_EXECUTION_STATUS_")) + ") without recording a result"
	return s.Store.UpdateKnowledgeDocument(ctx, d.ID, func(x *models.KnowledgeDocument) error {
		if x.Final() {
			return nil
		}
		x.Status, x.Error, x.WaitingFor = models.KnowledgeFailed, reason, ""
		return nil
	})
}

// Reconcile reconciles every non-final document (the sweeper).
func (s *Service) Reconcile(ctx context.Context) error {
	docs, err := s.Store.ListKnowledgeDocuments(ctx, "")
	if err != nil {
		return err
	}
	for i := range docs {
		if !docs[i].Final() {
			if _, err := s.reconcile(ctx, &docs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// RunSweeper syncs every base once and reconciles non-final documents
// every interval until ctx ends.
func (s *Service) RunSweeper(ctx context.Context, interval time.Duration) {
	for _, id := range s.IDs() {
		if _, err := s.Sync(ctx, id); err != nil {
			s.log().Warn("knowledge base not synced at start; POST /knowledge/bases/{id}/reindex tries again", "base", id, "err", err)
		}
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.Reconcile(ctx); err != nil {
				s.log().Warn("knowledge reconciliation", "err", err)
			}
		}
	}
}

// AddSource adds a source to a base and indexes it. A path must stay
// inside the workspace (no absolute path, no ..); a URL passes the SSRF
// policy.
func (s *Service) AddSource(ctx context.Context, base, source string) (*Base, error) {
	if !s.Has(base) {
		return nil, fmt.Errorf("%w: %q", ErrBaseNotFound, base)
	}
	source = strings.TrimSpace(source)
	switch {
	case source == "":
		return nil, fmt.Errorf("%w: source is empty", ErrInvalid)
	case len(source) > 700:
		return nil, fmt.Errorf("%w: source is longer than 700 characters", ErrInvalid)
	case isURL(source):
		if _, err := s.SSRF.CheckURL(source); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
		}
	case strings.Contains(source, "://"):
		return nil, fmt.Errorf("%w: only files, folders, globs under the workspace and http(s) URLs are sources", ErrInvalid)
	default:
		if filepath.IsAbs(source) || !filepath.IsLocal(filepath.Clean(source)) {
			return nil, fmt.Errorf("%w: %q leads out of the workspace (sources added through the API are relative paths inside it)", ErrInvalid, source)
		}
	}
	if err := s.Store.AddKnowledgeSource(ctx, base, source); err != nil {
		return nil, err
	}
	if _, err := s.Sync(ctx, base); err != nil {
		return nil, err
	}
	return s.Base(ctx, base)
}

// Sync expands a base's sources into documents and starts the ingestion
// of each (an unchanged document is found unchanged by its workflow and
// costs nothing); documents no source names any more are removed. It
// returns how many ingestions it started.
func (s *Service) Sync(ctx context.Context, base string) (int, error) {
	if !s.Has(base) {
		return 0, fmt.Errorf("%w: %q", ErrBaseNotFound, base)
	}
	srcs, err := s.sources(ctx, base)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	started := 0
	var startErr error
	for _, src := range srcs {
		for _, ref := range expand(s.Workspace, src) {
			id := DocumentID(base, ref.Source)
			if seen[id] {
				continue
			}
			seen[id] = true
			cur, err := s.Store.GetKnowledgeDocument(ctx, id)
			if err != nil && !errors.Is(err, models.ErrNotFound) {
				return started, err
			}
			d := &models.KnowledgeDocument{ID: id, Base: base, Source: ref.Source, Status: models.KnowledgeQueued,
				WorkflowID: workflows.KnowledgeIngestWorkflowID(id)}
			if cur != nil {
				d = cur
				d.WorkflowID = workflows.KnowledgeIngestWorkflowID(id)
				if d.Status == models.KnowledgeFailed {
					d.Status, d.Error = models.KnowledgeQueued, ""
				}
			}
			d.Root = ref.Root
			if ref.Err != "" {
				d.Status, d.Error = models.KnowledgeFailed, ref.Err
				if err := s.Store.UpsertKnowledgeDocument(ctx, d); err != nil {
					return started, err
				}
				continue
			}
			if err := s.Store.UpsertKnowledgeDocument(ctx, d); err != nil {
				return started, err
			}
			if err := s.start(ctx, id); err != nil {
				startErr = err
				continue
			}
			started++
		}
	}
	docs, err := s.Store.ListKnowledgeDocuments(ctx, base)
	if err != nil {
		return started, err
	}
	for _, d := range docs {
		if !seen[d.ID] {
			if err := s.removeDocument(ctx, &d); err != nil {
				return started, err
			}
		}
	}
	return started, startErr
}

func (s *Service) removeDocument(ctx context.Context, d *models.KnowledgeDocument) error {
	if s.Vectors != nil {
		if err := s.Vectors.DeleteDocument(ctx, d.Base, d.ID); err != nil {
			return err
		}
	}
	if err := s.Store.DeleteKnowledgeTexts(ctx, d.ID); err != nil {
		return err
	}
	return s.Store.DeleteKnowledgeDocument(ctx, d.ID)
}

// start starts a document's ingestion; one already running is left to
// run (it read the document when it started; a later reindex finds the
// newer content).
func (s *Service) start(ctx context.Context, id string) error {
	if s.Temporal == nil {
		return fault.NotEnabled("knowledge ingestion needs the workflow engine")
	}
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.KnowledgeIngestWorkflowID(id),
		TaskQueue:                s.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:            "index knowledge document " + id,
	}, workflows.KnowledgeIngestWorkflowName, workflows.KnowledgeIngestInput{
		Version: workflows.KnowledgeIngestInputVersion, Document: id, BudgetWait: s.BudgetWait})
	if err != nil {
		return fmt.Errorf("start the ingestion of %s: %w", id, errors.Join(fault.ErrTemporalUnavailable, err))
	}
	return nil
}

// NudgeBudgetWaits tells the ingestions waiting for budget that the cost
// configuration changed (workflows.SignalCostsChanged).
func (s *Service) NudgeBudgetWaits(ctx context.Context) (int, error) {
	if s == nil || s.Temporal == nil {
		return 0, nil
	}
	docs, err := s.Store.ListKnowledgeDocuments(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range docs {
		if d.WaitingFor != workflows.WaitingForBudget {
			continue
		}
		if err := s.Temporal.SignalWorkflow(ctx, d.WorkflowID, "", workflows.SignalCostsChanged, nil); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// version is the content hash a document's chunks are stored under: the
// text, the chunking and the embedding model (a change of any re-embeds).
func (s *Service) version(text string) string {
	model := ""
	if s.Embedder != nil {
		model = s.Embedder.Model()
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%d\x00%s\x00", s.Config.Chunking.Size, s.Config.Chunking.Overlap, model)
	h.Write([]byte(text))
	return hex.EncodeToString(h.Sum(nil))[:32]
}
