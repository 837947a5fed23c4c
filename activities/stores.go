package activities

import (
	"context"

	"github.com/agentryhq/agentry/models"
)

// The stores the activity structs take: each names only the writes its
// activities make (*models.Store implements all of them), so a reader sees
// what a workflow's activities touch and a test can hand in a fake.

// TaskRunStore is what the task-run activities write: the run's state, its
// artifacts and the events they publish.
type TaskRunStore interface {
	MarkRunStarted(ctx context.Context, runID int64) (*models.TaskRun, error)
	FinishRun(ctx context.Context, o models.RunOutcome) (run *models.TaskRun, applied bool, err error)
	ParkRun(ctx context.Context, w models.RunWait) (bool, error)
	ResumeRun(ctx context.Context, w models.RunWait) (bool, error)
	RecordArtifact(ctx context.Context, na models.NewArtifact) (*models.Artifact, bool, error)
	InsertEvent(ctx context.Context, ev *models.Event) (bool, error)
}

// exchangeStore is what a run that ends in a chat exchange writes (a
// firing or an asynchronous webhook run): the exchange itself, and the
// delivery of its reply.
type exchangeStore interface {
	SaveExchange(ctx context.Context, sess *models.ChatSession, run *models.AgentRun, msgs []models.ChatMessage) error
	AgentRunByID(ctx context.Context, runID string) (*models.AgentRun, error)
	CreateDelivery(ctx context.Context, d *models.Delivery) error
}

// ScheduledStore is what a scheduled firing writes: its exchange, the
// delivery of its reply and the firing's record.
type ScheduledStore interface {
	exchangeStore
	SaveScheduleRun(ctx context.Context, r *models.ScheduleRun) error
	FinishScheduleRun(ctx context.Context, r models.ScheduleRun) error
}

// WebhookRunStore is what an asynchronous webhook run writes: its
// exchange, the delivery of its reply and the run's record.
type WebhookRunStore interface {
	exchangeStore
	CreateWebhookRun(ctx context.Context, r *models.WebhookRun) error
	UpdateWebhookRun(ctx context.Context, id string, set map[string]any) error
	GetWebhookRun(ctx context.Context, id string) (*models.WebhookRun, error)
}

var (
	_ TaskRunStore    = (*models.Store)(nil)
	_ ScheduledStore  = (*models.Store)(nil)
	_ WebhookRunStore = (*models.Store)(nil)
)
