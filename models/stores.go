package models

import (
	"context"
	"database/sql"
	"time"
)

// The store interfaces: one per domain, each what that domain's consumers
// (the services in internal/*, activities, routes) take instead of the whole
// *Store. *Store implements all of them (the assertions below); a test or a
// new backend implements only the one it needs. A new domain adds its
// interface here, beside the others, and its files as <domain>*.go.

// ApprovalStore is the approvals domain (approvals.go): what internal/approvals
// and the approval activities take.
type ApprovalStore interface {
	RequestApproval(ctx context.Context, a Approval) (*Approval, error)
	ResolveApproval(ctx context.Context, id int64, status, by, comment string, at time.Time) (*Approval, error)
	GetApproval(ctx context.Context, id int64) (*Approval, error)
	ListApprovals(ctx context.Context, f ApprovalFilter) ([]Approval, int64, error)
}

// ChatStore is the chat domain (chat*.go, sessionkey.go, historycache.go):
// sessions, their messages, the runs' action log and feedback; what
// internal/chat takes. SaveExchange is the chat hot path's one write.
type ChatStore interface {
	GetSession(ctx context.Context, id string) (*ChatSession, error)
	RecentMessages(ctx context.Context, sessionID string, limit int) ([]ChatMessage, error)
	SaveExchange(ctx context.Context, sess *ChatSession, run *AgentRun, msgs []ChatMessage) error
	FlushLater(ctx context.Context)
	AgentRunByID(ctx context.Context, runID string) (*AgentRun, error)
	FindRun(ctx context.Context, agentID, sessionID, runID, responseID string) (*AgentRun, error)
	UpsertFeedback(ctx context.Context, fb *Feedback) (*Feedback, *LearningProposal, error)
	ListFeedback(ctx context.Context, agentID string, limit int) ([]FeedbackWithProposal, error)
	// ListSessionSummaries is GET /memory's listing.
	ListSessionSummaries(ctx context.Context, agentID string, limit int) ([]SessionSummary, error)
}

// DeliveryStore is the deliveries domain (deliveries*.go): outbound messages,
// their attempts, channel overrides and event hooks' cursors; what
// internal/delivery takes.
type DeliveryStore interface {
	CreateDelivery(ctx context.Context, d *Delivery) error
	RecordAttempt(ctx context.Context, r AttemptRecord) error
	UnstartedDeliveries(ctx context.Context, before time.Time, limit int) ([]Delivery, error)
	MarkDeliveryStarted(ctx context.Context, id string) error
	FinishDelivery(ctx context.Context, id, status, lastError string) error
	GetDelivery(ctx context.Context, id string) (*Delivery, []DeliveryAttempt, error)
	ListDeliveries(ctx context.Context, channel string, limit int) ([]Delivery, error)
	ChannelStats(ctx context.Context, channel string) (ChannelStats, error)
	GetChannelOverride(ctx context.Context, channelID string) (*ChannelOverride, error)
	SaveChannelOverride(ctx context.Context, o *ChannelOverride) error
	GetHookCursor(ctx context.Context, key string) (int64, bool, error)
	SetHookCursor(ctx context.Context, key string, eventID int64) error
}

// ChannelStore is the messaging channels' domain (channels.go): receive
// cursors, settings changed through the API and the inbound messages'
// record; what internal/channels takes.
type ChannelStore interface {
	Cursor(ctx context.Context, key string) (string, error)
	SetCursor(ctx context.Context, key, value string) error
	CursorKeys(ctx context.Context, prefix string) ([]string, error)
	GetChannelSetting(ctx context.Context, channelID string) (*ChannelSetting, error)
	SaveChannelSetting(ctx context.Context, c *ChannelSetting) error
	RecordChannelMessage(ctx context.Context, m *ChannelMessage) error
	ChannelMessageStats(ctx context.Context, channelID string) (ChannelMessageStats, error)
	ListChannelMessages(ctx context.Context, channelID string, limit int) ([]ChannelMessage, error)
}

// ScheduleStore is the scheduled agents' firings (scheduleruns.go,
// ScheduleRun) and the deliveries they handed their replies to; what
// internal/schedules takes.
type ScheduleStore interface {
	SaveScheduleRun(ctx context.Context, r *ScheduleRun) error
	FinishScheduleRun(ctx context.Context, r ScheduleRun) error
	LastScheduleRuns(ctx context.Context, agentIDs []string) (map[string]ScheduleRun, error)
	GetDelivery(ctx context.Context, id string) (*Delivery, []DeliveryAttempt, error)
}

// EventStore is the events domain (events.go): the append-only events table;
// what internal/events takes.
type EventStore interface {
	InsertEvent(ctx context.Context, ev *Event) (bool, error)
	EventsAfter(ctx context.Context, after int64, f EventFilter, limit int) ([]Event, error)
	LastEventID(ctx context.Context) (int64, error)
}

// LedgerStore is the cost ledger domain (ledger*.go): what internal/costs
// takes. OpenCostLedger gives the ledger that admits and settles calls and
// reports on them: a concrete *CostLedger, so the chat hot path calls it
// directly, without an interface in between, and it exposes the ledger's
// methods only (ledger_forward.go), not the rest of the store.
type LedgerStore interface {
	OpenCostLedger(ctx context.Context) (*CostLedger, error)
}

// MCPStore is the registered MCP servers (mcp.go); what internal/mcp takes.
type MCPStore interface {
	PutMCPServer(ctx context.Context, m *MCPServer) (created bool, err error)
	ListMCPServers(ctx context.Context) ([]MCPServer, error)
	DeleteMCPServer(ctx context.Context, id string) error
	GetMCPServer(ctx context.Context, id string) (*MCPServer, error)
}

// PackageInstallStore is the package install jobs (packageinstall.go); what
// internal/pkginstall takes.
type PackageInstallStore interface {
	CreatePackageInstallJob(ctx context.Context, j *PackageInstallJob) error
	GetPackageInstallJob(ctx context.Context, id string) (*PackageInstallJob, error)
	ListPackageInstallJobs(ctx context.Context, limit int, unfinishedOnly bool) ([]PackageInstallJob, error)
	UpdatePackageInstallJob(ctx context.Context, id string, fn func(*PackageInstallJob) error) (*PackageInstallJob, error)
}

// ReconcileStore is the reconciliation domain (reconcile.go): providers'
// usage exports and the runs comparing them with the ledger; what
// internal/reconcile takes.
type ReconcileStore interface {
	SaveReconciliationRun(ctx context.Context, r *ReconciliationRun) error
	GetReconciliationRun(ctx context.Context, id string) (*ReconciliationRun, error)
	LatestReconciliationRun(ctx context.Context) (*ReconciliationRun, error)
	ReplaceProviderUsage(ctx context.Context, provider, day, importID string, lines []ProviderUsageLine) error
	ProviderUsage(ctx context.Context, provider, day string) ([]ProviderUsageLine, error)
	LedgerCostByModel(ctx context.Context, provider string, from, to time.Time) (map[string]int64, error)
}

// RunLogStore is the durable runs' conversations and snapshots (runlog.go);
// what internal/runlog takes.
type RunLogStore interface {
	PutRunMessage(ctx context.Context, m RunMessage) error
	PutRunMessages(ctx context.Context, ms ...RunMessage) error
	RunMessages(ctx context.Context, runKey string, before int) ([]RunMessage, error)
	RunMessageAt(ctx context.Context, runKey string, seq int) (*RunMessage, error)
	LastRunMessage(ctx context.Context, runKey string) (*RunMessage, error)
	PutRunSnapshot(ctx context.Context, sha, body string) error
	RunSnapshotBody(ctx context.Context, sha string) (string, error)
	DeleteRunMessages(ctx context.Context, runKey string) error
}

// SecretStore is the sealed secrets (secrets.go); what internal/secrets
// takes.
type SecretStore interface {
	PutSecret(ctx context.Context, sec *Secret) error
	GetSecret(ctx context.Context, name string) (*Secret, error)
	ListSecrets(ctx context.Context) ([]SecretMeta, error)
	DeleteSecret(ctx context.Context, name string) error
	// The data keys (secretkeys.go) the values are sealed with, each
	// wrapped by the credentials provider.
	PutSecretKey(ctx context.Context, k *SecretKey) error
	ListSecretKeys(ctx context.Context) ([]SecretKey, error)
	RewrapSecretKey(ctx context.Context, id string, wrapped []byte) error
	ListSealedSecrets(ctx context.Context) ([]Secret, error)
	ResealSecret(ctx context.Context, sec *Secret, oldKeyID string) (bool, error)
}

// WebhookStore is the inbound webhooks' idempotency records
// (webhookidempotency.go) and asynchronous runs (webhookruns.go); what
// internal/webhook takes.
type WebhookStore interface {
	ClaimIdempotency(ctx context.Context, rec *WebhookIdempotency, lease time.Duration) (*WebhookIdempotency, bool, error)
	RenewIdempotency(ctx context.Context, key, owner string, lease time.Duration) (bool, error)
	GetIdempotency(ctx context.Context, key string) (*WebhookIdempotency, error)
	CompleteIdempotency(ctx context.Context, key, owner, response string) error
	ReleaseIdempotency(ctx context.Context, key, owner string) error
	PurgeIdempotency(ctx context.Context) (int64, error)
	CreateWebhookRun(ctx context.Context, r *WebhookRun) error
	UpdateWebhookRun(ctx context.Context, id string, set map[string]any) error
	GetWebhookRun(ctx context.Context, id string) (*WebhookRun, error)
}

// TaskRunStore is the workboard's runs (workboard_runs.go, workboard_wait.go,
// workboard_active.go) and the task they run; what internal/taskruns takes.
// DriverName and StorageFullRecently let it sweep and report stalls.
type TaskRunStore interface {
	GetTask(ctx context.Context, id int64) (*Task, error)
	CreateRun(ctx context.Context, nr NewRun) (*TaskRun, error)
	SetRunTemporalID(ctx context.Context, runID int64, temporalRunID string) error
	DeleteQueuedRun(ctx context.Context, runID int64) error
	UnstartedRuns(ctx context.Context, before time.Time, limit int) ([]TaskRun, error)
	GetRun(ctx context.Context, taskID, runID int64) (*TaskRun, error)
	RunByID(ctx context.Context, runID int64) (*TaskRun, error)
	ActiveRun(ctx context.Context, taskID int64) (*TaskRun, error)
	ListRuns(ctx context.Context, taskID int64, p Page) ([]TaskRun, int64, int64, error)
	MarkRunStarted(ctx context.Context, runID int64) (*TaskRun, error)
	FinishRun(ctx context.Context, o RunOutcome) (run *TaskRun, applied bool, err error)
	ParkRun(ctx context.Context, w RunWait) (bool, error)
	ResumeRun(ctx context.Context, w RunWait) (bool, error)
	RunsWaitingFor(ctx context.Context, waitingFor string) ([]TaskRun, error)
	// PeerRunsWaitingFor: the peer runs (peerruns.go) of task runs and
	// firings park for the same reasons and are nudged the same way.
	PeerRunsWaitingFor(ctx context.Context, waitingFor string) ([]PeerRun, error)
	CountRunsWaitingFor(ctx context.Context, waitingFor string) (int64, error)
	CountActiveRuns(ctx context.Context) (int64, error)
	DriverName() string
	StorageFullRecently() bool
}

// WorkboardStore is the whole workboard domain (workboard*.go): tasks,
// their runs, artifacts and comments; what the workboard's routes take.
type WorkboardStore interface {
	TaskRunStore
	CreateTask(ctx context.Context, f TaskFields) (*Task, error)
	UpdateTask(ctx context.Context, id int64, f TaskFields) (*Task, error)
	DeleteTask(ctx context.Context, id int64) (*Task, error)
	ListTasks(ctx context.Context, f TaskFilter) ([]Task, int64, error)
	RecordArtifact(ctx context.Context, na NewArtifact) (*Artifact, bool, error)
	GetArtifact(ctx context.Context, id int64) (*Artifact, error)
	ListArtifacts(ctx context.Context, taskID int64, p Page) ([]Artifact, int64, int64, error)
	ListComments(ctx context.Context, taskID int64, p Page) ([]Comment, int64, int64, error)
	CreateComment(ctx context.Context, taskID int64, nc NewComment) (*Comment, *Task, error)
	DeleteComment(ctx context.Context, id int64) error
}

var (
	_ ApprovalStore       = (*Store)(nil)
	_ ChatStore           = (*Store)(nil)
	_ ChannelStore        = (*Store)(nil)
	_ DeliveryStore       = (*Store)(nil)
	_ ScheduleStore       = (*Store)(nil)
	_ EventStore          = (*Store)(nil)
	_ LedgerStore         = (*Store)(nil)
	_ MCPStore            = (*Store)(nil)
	_ PackageInstallStore = (*Store)(nil)
	_ ReconcileStore      = (*Store)(nil)
	_ RunLogStore         = (*Store)(nil)
	_ SecretStore         = (*Store)(nil)
	_ WebhookStore        = (*Store)(nil)
	_ TaskRunStore        = (*Store)(nil)
	_ WorkboardStore      = (*Store)(nil)
	_ VectorDatabase      = (*Store)(nil)
)

// VectorDatabase is the application database as the vector stores
// (internal/vector/sqlite, internal/vector/postgres) take it: they speak
// SQL of their own (FTS5, tsvector, pgvector) on the same database.
type VectorDatabase interface {
	// DriverName is DriverSQLite or DriverPostgres.
	DriverName() string
	// SQLDB is the database's connection pool.
	SQLDB() (*sql.DB, error)
}
