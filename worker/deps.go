package worker

import (
	"log/slog"

	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/events"
	"github.com/agentryhq/agentry/internal/knowledge"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/pkginstall"
	"github.com/agentryhq/agentry/internal/reconcile"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Deps are the services the activities stand on. The gateway assembles
// them from the configuration (gateway.NewServices); the worker builds
// every activity struct from them (Activities). A new activity struct
// takes what it needs from here, adding a field when nothing fits.
type Deps struct {
	// Temporal is the client the worker polls with, on TaskQueue.
	Temporal  client.Client
	TaskQueue string
	Logger    *slog.Logger

	Config  *config.Loaded
	Store   *models.Store
	Agents  *agentdef.Registry
	Router  *llm.Router
	Toolbox *agent.Toolbox
	// RunLog keeps durable runs' conversations and snapshots.
	RunLog *runlog.Log
	Chat   *chat.Service
	Events *events.Bus
	// Channels resolves delivery destinations; Retry is runtime.delivery;
	// SSRF guards the delivery requests (runtime.ssrf).
	Channels *delivery.Channels
	Retry    workflows.DeliveryRetry
	SSRF     netguard.Policy
	// Messaging sends on the messaging channels (ChannelTurn replies,
	// channel deliveries).
	Messaging *channels.Service
	// Reconcile and PackageInstalls are the services behind the Reconcile
	// and PackageInstall workflows' steps.
	Reconcile       *reconcile.Service
	PackageInstalls *pkginstall.Service
	// Knowledge is the service behind the KnowledgeIngest workflow's steps.
	Knowledge *knowledge.Service
}

// Activities builds every activity struct from d, one per workflow family:
// each exported method becomes an activity named after the method (the
// names the workflows' contracts call).
func Activities(d Deps) []any {
	cfg := d.Config
	artifacts, root := "", ""
	if cfg != nil {
		artifacts, root = cfg.Workspace.ArtifactsDir(), cfg.Workspace.Root
	}
	return []any{
		// TaskRun (and its approvals).
		&activities.TaskRunActivities{Store: d.Store, Router: d.Router, Toolbox: d.Toolbox, Events: notifier(d.Events), Log: d.RunLog,
			ArtifactsDir: artifacts, Workspace: root},
		&activities.ApprovalActivities{Store: d.Store, Log: d.RunLog, Events: notifier(d.Events)},
		// Delivery, ScheduledAgent, WebhookRun.
		&activities.DeliveryActivities{Store: d.Store, Targets: targets(d.Channels), Sender: delivery.NewSender(d.SSRF, d.Retry.AttemptTimeout), Log: d.Logger},
		&activities.ScheduledActivities{Chat: d.Chat, Agents: agents(d.Agents), Store: d.Store, Channels: d.Channels, Retry: d.Retry,
			Config: cfg, Router: d.Router, Toolbox: d.Toolbox, Log: d.RunLog, ArtifactsDir: artifacts, Workspace: root},
		&activities.WebhookRunActivities{Config: cfg, Chat: d.Chat, Agents: agents(d.Agents), Store: d.Store, Router: d.Router, Toolbox: d.Toolbox,
			Log: d.RunLog, Channels: d.Channels, Retry: d.Retry},
		// ChannelConversation, ChannelTurn and channel deliveries.
		&activities.ChannelActivities{Config: cfg, Chat: d.Chat, Agents: agents(d.Agents), Store: d.Store, Router: d.Router, Toolbox: d.Toolbox,
			Log: d.RunLog, Channels: channelSender(d.Messaging), Deliveries: d.Store},
		// Reconcile, PackageInstall.
		&activities.ReconcileActivities{Service: d.Reconcile},
		&activities.PackageInstallActivities{Service: d.PackageInstalls},
		// KnowledgeIngest.
		&activities.KnowledgeActivities{Service: d.Knowledge},
		// Delegation and PeerRun (docs/teams.md).
		&activities.PeerActivities{Store: d.Store, Agents: agents(d.Agents), Config: cfg, Router: d.Router, Toolbox: d.Toolbox, Log: d.RunLog,
			Events: notifier(d.Events), ArtifactsDir: artifacts, Workspace: root},
	}
}

// Build prepares the worker of d with every workflow and every activity;
// add registrations and interceptors before Start.
func Build(d Deps) *Worker {
	w := New(d.Temporal, d.TaskQueue, d.Logger)
	w.AddActivities(Activities(d)...)
	return w
}

// The activity structs take interfaces; a nil service must stay a nil
// interface (not a typed nil) so that their nil checks hold.

func notifier(b *events.Bus) activities.Notifier {
	if b == nil {
		return nil
	}
	return b
}

func targets(c *delivery.Channels) activities.Targets {
	if c == nil {
		return nil
	}
	return c
}

func channelSender(c *channels.Service) activities.ChannelSender {
	if c == nil {
		return nil
	}
	return c
}

func agents(r *agentdef.Registry) activities.Agents {
	if r == nil {
		return nil
	}
	return r
}
