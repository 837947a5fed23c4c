package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/agent"
	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/approvals"
	"github.com/agentryhq/agentry/internal/builder"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/costs"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/events"
	"github.com/agentryhq/agentry/internal/knowledge"
	"github.com/agentryhq/agentry/internal/lease"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/mcp"
	"github.com/agentryhq/agentry/internal/memory"
	"github.com/agentryhq/agentry/internal/pkginstall"
	"github.com/agentryhq/agentry/internal/plugins"
	"github.com/agentryhq/agentry/internal/reconcile"
	"github.com/agentryhq/agentry/internal/runlog"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/schedules"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/secrets"
	"github.com/agentryhq/agentry/internal/skills"
	"github.com/agentryhq/agentry/internal/taskruns"
	"github.com/agentryhq/agentry/internal/vector"
	"github.com/agentryhq/agentry/internal/voice"
	"github.com/agentryhq/agentry/internal/webhook"
	"github.com/agentryhq/agentry/worker"
)

// Services are the feature services built on top of the foundation. Each
// feature adds its service here, its routes through Features (features.go)
// and what its activities need through workerDeps: the worker builds the
// activity structs itself (worker.Activities).
type Services struct {
	gw     *Gateway
	log    *slog.Logger
	worker *worker.Worker
	cancel context.CancelFunc
	// bg lives until Stop: background work of the services.
	bg context.Context
	// leases runs the singleton duties once across the fleet (gateway/singletons.go).
	leases *lease.Elector
	// fleetLeft waits for this process's fleet_members row to be removed (gateway/fleetconfig.go).
	fleetLeft func()

	Agents  *agentdef.Registry
	Router  *llm.Router
	Toolbox *agent.Toolbox
	// RunLog keeps durable runs' conversations out of Temporal.
	RunLog *runlog.Log
	Chat   *chat.Service
	// AgentFiles writes definition files for the agent admin routes.
	AgentFiles *agentdef.Files
	// Secrets is the write-only secret store (credentials/secrets.key).
	Secrets *secrets.Store
	// Costs is LLM cost governance, the Router's admission gate.
	Costs *costs.Controller
	// Builder drafts and saves agents (gateway/builder.go).
	Builder *builder.Service
	// Voice mints and meters realtime voice sessions (gateway/voice.go).
	Voice *voice.Service
	// Events is the event stream (events table + in-process fan-out).
	Events *events.Bus
	// TaskRuns starts and cancels workboard task runs (TaskRun workflows).
	TaskRuns *taskruns.Service
	// Approvals decides the tool approvals durable runs wait for.
	Approvals *approvals.Service
	// Webhooks runs inbound webhooks (POST /webhooks/{agent_id}).
	Webhooks *webhook.Service
	// Channels is the webhook channel adapter; Deliveries queues outbound
	// messages as Delivery workflows.
	Channels   *delivery.Channels
	Deliveries *delivery.Service
	// Messaging are the messaging channels (Telegram, Slack, Discord,
	// WhatsApp; gateway/channels.go).
	Messaging *channels.Service
	// Schedules keeps the cron agents' Temporal Schedules in sync.
	Schedules *schedules.Manager
	// Reconcile imports provider usage exports and compares them with the
	// ledger; Reconciler keeps its Schedule and starts on-demand runs.
	Reconcile  *reconcile.Service
	Reconciler *reconcile.Scheduler
	// PackageInstalls runs package install jobs (PackageInstall workflows).
	PackageInstalls *pkginstall.Service
	// MCP holds the MCP servers (config.yaml mcp: and PUT /mcp/own/{id}).
	MCP *mcp.Registry
	// Skills are the skill folders (workspace skills/ and skill_dirs);
	// SkillInstaller reviews and installs new ones.
	Skills         *skills.Registry
	SkillInstaller *skills.Installer
	// Plugins are the plugin folders (workspace plugins/ and plugin_dirs;
	// gateway/plugins.go).
	Plugins *plugins.Registry
	// Memory is what agents with memory remember (internal/memory).
	Memory *memory.Service
	// Vectors is the knowledge bases' vector store (vector.backend;
	// gateway/vector.go).
	Vectors vector.Store
	// Knowledge is knowledge bases (gateway/knowledge.go).
	Knowledge *knowledge.Service
	// Jail is the local confinement; Code runs run_python (gateway/sandbox.go).
	Jail *sandbox.Jail
	Code sandbox.Executor
}

// AgentWatchInterval is how often agent files are checked for changes.
var AgentWatchInterval = 2 * time.Second

// NewServices builds the feature services.
func NewServices(ctx context.Context, g *Gateway, log *slog.Logger) (*Services, error) {
	cfg := g.Config
	bg, cancel := context.WithCancel(detached.Context(ctx))
	s := &Services{gw: g, log: log, cancel: cancel, bg: bg}
	s.leases = newElector(g, log)
	left, err := joinFleet(bg, g.Store, &cfg.Config, s.leases.HolderID(), log)
	if err != nil {
		cancel()
		return nil, err
	}
	s.fleetLeft = left

	credOpts, err := secrets.OpenProvider(ctx, cfg.Credentials, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	s.Secrets = secrets.NewWith(g.Store, cfg.Workspace.CredentialsDir(), credOpts)
	s.Secrets.Scrub = scrub.Register("secrets")
	// Secrets `agentry onboard` left before any gateway ran (a provider's
	// key): sealed now, before the router reads them.
	if names, err := s.Secrets.ImportSeeds(ctx, cfg.Workspace.CredentialsDir()); err != nil {
		log.Error("seeded secrets not stored (kept for the next start)", "err", err)
	} else if len(names) > 0 {
		log.Info("seeded secrets stored", "names", names)
	}
	if err := s.Secrets.RefreshScrub(ctx); err != nil {
		log.Warn("secrets store values are not scrubbed from outside text", "err", err)
	}
	router, err := NewRouter(ctx, &cfg.Config, s.Secrets.Reveal, log)
	if err != nil {
		cancel()
		return nil, err
	}
	s.Router = router
	s.Agents = agentdef.NewRegistry(append([]string{cfg.Workspace.AgentsDir()}, cfg.AgentDirs...), log)
	go s.Agents.Watch(bg, AgentWatchInterval)
	s.Toolbox = agent.NewToolbox(SSRFPolicy(&cfg.Config), cfg.Runtime.ToolTimeout)
	if err := s.addMCP(ctx); err != nil {
		cancel()
		return nil, err
	}
	s.Toolbox.OutputCap = cfg.Runtime.ToolOutputCap
	if err := s.addSandbox(ctx); err != nil {
		cancel()
		return nil, err
	}
	s.RunLog = &runlog.Log{Store: g.Store, BlobDir: cfg.Workspace.BlobsDir()}
	s.addSkills()
	s.addPlugins()
	s.Memory = memory.New(cfg, g.Store)
	s.Toolbox.Memory = s.Memory
	s.Chat = &chat.Service{Config: cfg, Agents: s.Agents, Router: s.Router, Store: g.Store, Toolbox: s.Toolbox, Memory: s.Memory}
	s.Events = events.New(g.Store, log)
	if s.Costs, err = NewCosts(ctx, g, s.Agents, s.Events, log); err != nil {
		cancel()
		return nil, err
	}
	s.Router.SetGate(s.Costs.Observed(g.auditRejection))
	go s.Costs.RunReaper(bg)
	s.AgentFiles = agentdef.NewFiles(cfg.Workspace.AgentsDir(), s.Agents)
	s.addBuilder()
	s.addVoice()
	s.addWorkboard()
	s.addReconciliation(bg)
	s.addPackageInstalls(bg)
	if err := s.addVectors(ctx); err != nil {
		cancel()
		return nil, err
	}
	if err := s.addKnowledge(ctx); err != nil {
		cancel()
		return nil, err
	}
	if err := s.addDelivery(bg); err != nil {
		cancel()
		return nil, err
	}
	if err := s.addMessaging(); err != nil {
		cancel()
		return nil, err
	}
	s.worker = worker.Build(s.workerDeps())
	return s, nil
}

// workerDeps hands the worker the services its activities stand on; the
// worker builds the activity structs from them.
func (s *Services) workerDeps() worker.Deps {
	g := s.gw
	return worker.Deps{Temporal: g.Temporal, TaskQueue: g.Config.Temporal.TaskQueue, Logger: s.log,
		Config: g.Config, Store: g.Store, Agents: s.Agents, Router: s.Router, Toolbox: s.Toolbox, RunLog: s.RunLog, Chat: s.Chat,
		Events: s.Events, Channels: s.Channels, Retry: s.Deliveries.Retry, SSRF: SSRFPolicy(&g.Config.Config),
		Reconcile: s.Reconcile, PackageInstalls: s.PackageInstalls, Messaging: s.Messaging, Knowledge: s.Knowledge}
}

// addDelivery wires webhooks in and out: the inbound webhook trigger, the
// webhook channel and the Delivery workflow, scheduled agents (Temporal
// Schedules synced now, on every agent reload and every minute) and the
// event hooks.
func (s *Services) addDelivery(bg context.Context) error {
	cfg, g := s.gw.Config, s.gw
	retry, err := delivery.RetryFromConfig(&cfg.Config)
	if err != nil {
		return err
	}
	policy := SSRFPolicy(&cfg.Config)
	hooks, err := delivery.ParseHooks(cfg.Hooks, policy)
	if err != nil {
		return err
	}
	s.Webhooks = &webhook.Service{Chat: s.Chat, Agents: s.Agents, Store: g.Store, Temporal: g.Temporal, TaskQueue: cfg.Temporal.TaskQueue}
	s.Channels = &delivery.Channels{Config: &cfg.Config, Store: g.Store, Secrets: s.Secrets, Policy: policy, Scrub: scrub.Register("channels")}
	if err := s.Channels.RefreshScrub(bg); err != nil {
		s.log.Warn("webhook channel header values are not scrubbed from outside text", "err", err)
	}
	s.Deliveries = &delivery.Service{Temporal: g.Temporal, TaskQueue: cfg.Temporal.TaskQueue, Store: g.Store, Channels: s.Channels, Retry: retry}
	// Deliveries recorded by a process that died before starting their
	// workflow are started now and by a sweep every minute.
	s.singleton(bg, DutyDeliverySweeper, func(ctx context.Context) { s.Deliveries.RunSweeper(ctx, s.log) })
	s.Schedules = &schedules.Manager{Client: g.Temporal, Agents: s.Agents, Store: g.Store, TaskQueue: cfg.Temporal.TaskQueue, Log: s.log}
	s.Agents.OnChange(s.Schedules.Notify)
	s.singleton(bg, DutyScheduleSync, s.Schedules.Run)
	if len(hooks) > 0 {
		h := &delivery.Hooks{Hooks: hooks, Events: s.Events, Store: g.Store, Deliveries: s.Deliveries, Log: s.log}
		s.singleton(bg, DutyEventHooks, func(ctx context.Context) { h.Run(ctx); <-ctx.Done() })
	}
	return nil
}

// addReconciliation wires reconciliation (spec cost rule 12): the service
// behind the Reconcile workflow's activities, its part of GET /costs/status,
// and the Schedule (kept in step with costs.reconciliation at start).
func (s *Services) addReconciliation(bg context.Context) {
	cfg, g := s.gw.Config, s.gw
	rc := &cfg.Costs.Reconciliation
	s.Reconcile = &reconcile.Service{Config: rc, Store: g.Store, Events: s.Events, Log: s.log}
	s.Costs.SetReconciliation(s.Reconcile.Report)
	s.Reconciler = &reconcile.Scheduler{Client: g.Temporal, TaskQueue: cfg.Temporal.TaskQueue, Log: s.log, Service: s.Reconcile,
		Enabled: rc.Enabled && len(rc.Providers) > 0, Interval: rc.Interval}
	s.singleton(bg, DutyReconcileSchedule, s.Reconciler.Run)
}

// addMCP connects the MCP servers of config.yaml and those registered
// through the API (in the background: an unreachable server is retried,
// it does not stop the gateway) and lets the toolbox call their tools.
func (s *Services) addMCP(ctx context.Context) error {
	cfg := s.gw.Config
	specs, err := mcp.ParseConfig(cfg.MCP)
	if err != nil {
		return err
	}
	manager := mcp.NewManager(mcp.Policy{Edition: cfg.Server.Edition, ServersDir: cfg.Workspace.MCPServersDir(),
		SSRF: SSRFPolicy(&cfg.Config)}, s.log)
	s.MCP = mcp.NewRegistry(s.gw.Store, s.Secrets, manager)
	if err := s.MCP.Load(ctx, specs); err != nil {
		s.log.Warn("mcp servers", "err", err)
	}
	s.Toolbox.MCP = manager
	return nil
}

// addSkills loads the skills (workspace skills/ first, then skill_dirs)
// and lets the toolbox offer and run their tools.
func (s *Services) addSkills() {
	cfg := s.gw.Config
	s.Skills = skills.NewRegistry(append([]string{cfg.Workspace.SkillsDir()}, cfg.SkillDirs...), s.log)
	// Skill tool scripts run in the run_python sandbox (gateway/sandbox.go).
	s.Skills.Runner = skills.Runner{Timeout: s.Toolbox.Timeout, Jail: s.Jail, Caps: SandboxCaps(&cfg.Config)}
	s.SkillInstaller = &skills.Installer{Registry: s.Skills, Dest: cfg.Workspace.SkillsDir(),
		DryRunner: skills.Runner{Timeout: SkillDryRunTimeout, Jail: s.Jail, Caps: SandboxCaps(&cfg.Config)}, SSRF: SSRFPolicy(&cfg.Config)}
	s.Toolbox.Skills = s.Skills
}

// SkillDryRunTimeout bounds each tool's sandboxed run during a review.
var SkillDryRunTimeout = 10 * time.Second

// addWorkboard wires task runs (the client side of TaskRun) and tool
// approvals.
func (s *Services) addWorkboard() {
	cfg, g := s.gw.Config, s.gw
	s.TaskRuns = &taskruns.Service{Client: g.Temporal, Store: g.Store, Agents: s.Agents, Router: s.Router, Toolbox: s.Toolbox, Config: cfg,
		Events: s.Events, TaskQueue: cfg.Temporal.TaskQueue, Log: s.RunLog, BuiltAt: time.Now(),
		WorkDir: func(taskID, runID int64) string {
			return activities.RunDir(cfg.Workspace.ArtifactsDir(), taskID, runID)
		}}
	// Runs queued by a process that died before starting their workflow
	// are failed now and by a sweep every minute (they stayed queued).
	s.singleton(s.bg, DutyTaskRunSweeper, func(ctx context.Context) { s.TaskRuns.RunSweeper(ctx, s.log) })
	s.Approvals = &approvals.Service{Client: g.Temporal, Store: g.Store, Events: s.Events}
}

// costsChanged applies changed budgets and quotas (PATCH /config) to cost
// governance and tells the runs waiting for budget to try again.
func (s *Services) costsChanged(ctx context.Context, cfg *config.Config) error {
	if err := s.Costs.Reconfigure(ctx, cfg); err != nil {
		return err
	}
	if err := refingerprintFleet(ctx, s.gw.Store, cfg, s.leases.HolderID()); err != nil {
		s.log.Warn("recording the changed configuration in fleet_members failed", "err", err)
	}
	if n, err := s.TaskRuns.NudgeBudgetWaits(ctx); err != nil {
		s.log.Warn("telling runs waiting for budget about the change failed; they check again on their timer", "told", n, "err", err)
	}
	if n, err := s.Knowledge.NudgeBudgetWaits(ctx); err != nil {
		s.log.Warn("telling ingestions waiting for budget about the change failed; they check again on their timer", "told", n, "err", err)
	}
	return nil
}

// Worker is the in-process worker, built from the services (workerDeps)
// with every workflow and activity; add registrations and interceptors
// before start.
func (s *Services) Worker() *worker.Worker { return s.worker }

// StartWorker starts the in-process Temporal worker.
func (s *Services) StartWorker() error { return s.worker.Start() }

// Stop stops background work.
func (s *Services) Stop() {
	s.cancel()
	s.leases.Wait() // duties stopped, leases released for the next holder
	s.fleetLeft()
	if s.Messaging != nil {
		s.Messaging.Stop()
	}
	if s.Secrets != nil {
		s.Secrets.Scrub.Close()
	}
	if s.Channels != nil {
		s.Channels.Scrub.Close()
	}
	if s.worker != nil {
		s.worker.Stop()
	}
	if s.Voice != nil {
		s.Voice.Close() // settles open sessions before the controller closes
	}
	if s.Costs != nil {
		s.Costs.Close()
	}
	if s.MCP != nil {
		s.MCP.Manager().Close()
	}
	if s.Code != nil {
		s.Code.Close()
	}
}
