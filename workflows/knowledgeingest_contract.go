package workflows

import (
	"strconv"
	"time"
)

// The KnowledgeIngest workflow's contract (docs/knowledge.md): one
// workflow per document of a knowledge base. The workflow is in
// knowledgeingest.go, its activities in activities/knowledge.go, the
// service that records documents and starts the workflow in
// internal/knowledge.
const (
	// KnowledgeIngestWorkflowName is the registered workflow type.
	KnowledgeIngestWorkflowName = "KnowledgeIngest"
	// KnowledgeIngestInputVersion is the current version of
	// KnowledgeIngestInput.
	KnowledgeIngestInputVersion = 1
	// ErrTypeKnowledgeRefused marks a document retrying cannot fix: an
	// unsupported or binary file, a PDF that does not parse, a file over
	// the size limit, a path out of its source folder, a URL the SSRF
	// policy blocks. Not retried; the document is failed with the reason.
	ErrTypeKnowledgeRefused = "KnowledgeRefused"

	// ActivityKnowledgePrepare reads and extracts the document, stores its
	// text under the content hash (the version) and says how many batches
	// it has; a document whose version is already published is
	// Unchanged. Input KnowledgeStep, result KnowledgePrepareResult.
	ActivityKnowledgePrepare = "KnowledgePrepare"
	// ActivityKnowledgeEmbedBatch embeds one batch of chunks (one
	// provider call, call id KnowledgeBatchCallID) and stages them in the
	// vector store; positions already staged are skipped. Input
	// KnowledgeBatchInput.
	ActivityKnowledgeEmbedBatch = "KnowledgeEmbedBatch"
	// ActivityKnowledgePublish makes the staged version the document's
	// only visible one (atomically) and records the document ready.
	// Input KnowledgeBatchInput (Batch unused).
	ActivityKnowledgePublish = "KnowledgePublish"
	// ActivityKnowledgeFinish records the final state of a document that
	// is not published: ready when Unchanged, failed with Error otherwise.
	ActivityKnowledgeFinish = "KnowledgeFinish"
	// ActivityKnowledgeWait records that the document waits for budget
	// (WaitingFor "budget") or stopped waiting (""). Input
	// KnowledgeWaitInput.
	ActivityKnowledgeWait = "KnowledgeWait"
)

// KnowledgeIngestWorkflowID is the workflow id of a document's ingestion:
// one at a time per document.
func KnowledgeIngestWorkflowID(documentID string) string { return "knowledge-" + documentID }

// KnowledgeBatchCallID is the ledger call id of one embedding batch: the
// workflow id and the batch's index, so a retried or resumed batch is
// counted (and paid) once.
func KnowledgeBatchCallID(workflowID, version string, batch int) string {
	if len(version) > 12 {
		version = version[:12]
	}
	return workflowID + "/" + version + "/batch-" + strconv.Itoa(batch)
}

// KnowledgeIngestInput is the workflow input: the document's id (its row
// holds the base and the source). BudgetWait bounds the time the
// ingestion waits for a hard budget in all (costs.run_budget_wait; 0:
// the document fails at the first refusal).
type KnowledgeIngestInput struct {
	Version    int           `json:"version,omitempty"`
	Document   string        `json:"document"`
	BudgetWait time.Duration `json:"budget_wait,omitempty"`
}

// KnowledgeIngestResult is the workflow result.
type KnowledgeIngestResult struct {
	Document  string `json:"document"`
	Status    string `json:"status"`
	Unchanged bool   `json:"unchanged,omitempty"`
	Chunks    int    `json:"chunks"`
	Error     string `json:"error,omitempty"`
}

// KnowledgeStep names the document a step works on.
type KnowledgeStep struct {
	Document string `json:"document"`
}

// KnowledgePrepareResult is what extraction found.
type KnowledgePrepareResult struct {
	Unchanged bool   `json:"unchanged,omitempty"`
	Version   string `json:"version"`
	Chunks    int    `json:"chunks"`
	// BatchSize is fixed for the version (a configuration change during
	// the ingestion does not move batch boundaries).
	BatchSize int `json:"batch_size"`
}

// Batches is the number of embedding batches.
func (r KnowledgePrepareResult) Batches() int {
	if r.BatchSize < 1 {
		return 0
	}
	return (r.Chunks + r.BatchSize - 1) / r.BatchSize
}

// KnowledgeBatchInput is one batch of a version.
type KnowledgeBatchInput struct {
	Document  string `json:"document"`
	Version   string `json:"version"`
	Batch     int    `json:"batch"`
	BatchSize int    `json:"batch_size"`
	CallID    string `json:"call_id"`
}

// KnowledgeFinishInput ends a document without publishing.
type KnowledgeFinishInput struct {
	Document  string `json:"document"`
	Unchanged bool   `json:"unchanged,omitempty"`
	Error     string `json:"error,omitempty"`
}

// KnowledgeWaitInput records a budget wait of a document.
type KnowledgeWaitInput struct {
	Document   string    `json:"document"`
	WaitingFor string    `json:"waiting_for"`
	Reason     string    `json:"reason,omitempty"`
	Until      time.Time `json:"until,omitempty"`
}

// KnowledgeStepTimeout bounds one step; KnowledgeHeartbeatTimeout is how
// long a step may go without a heartbeat before it counts as lost (its
// worker died) and runs again.
const (
	KnowledgeStepTimeout      = 5 * time.Minute
	KnowledgeHeartbeatTimeout = 15 * time.Second
)
