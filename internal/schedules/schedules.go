// Package schedules keeps Temporal Schedules in step with the agents that
// have `trigger: cron`: one schedule per agent, created, updated, paused
// (agent disabled) and deleted as definitions change and at every start,
// so a restart never duplicates a schedule and a removed agent leaves no
// orphan. Each firing starts the ScheduledAgent workflow
// (workflows/scheduled.go), which runs the agent and hands the reply to
// the Delivery workflow.
package schedules

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// Timing of the schedules (the ScheduledAgent workflow's contract - name,
// input, triggers, firing timeout - is in workflows/scheduled_contract.go).
const (
	// DefaultCatchupWindow: when Temporal was unavailable at a fire time,
	// a firing missed by at most this long still runs (once: overlap is
	// skip) when it is back; older ones are dropped.
	DefaultCatchupWindow = 10 * time.Minute
	// DefaultResyncInterval is how often the schedules are compared with
	// the definitions besides after every reload.
	DefaultResyncInterval = time.Minute
)

// Errors of schedule requests, in the fault vocabulary (the API maps them).
var (
	ErrNoSchedule    = fault.NotFound("agent has no schedule (trigger is not cron)")
	ErrAgentDisabled = fault.Conflict("agent_disabled", "agent is disabled")
	// ErrUnavailable wraps failures to reach Temporal (503).
	ErrUnavailable = fault.ErrTemporalUnavailable
)

// Agents is the agent registry.
type Agents interface {
	Get(id string) (*agentdef.Definition, bool)
	List() []*agentdef.Definition
}

// Manager syncs and serves the schedules of one gateway installation. The
// installation is identified by its task queue: schedule ids are
// "<task_queue>:schedule:<agent_id>" (agentry:schedule:daily-report), so
// several installations can share a Temporal namespace, and only schedules
// with this prefix are ever deleted.
type Manager struct {
	Client    client.Client
	Agents    Agents
	Store     models.ScheduleStore
	TaskQueue string
	Log       *slog.Logger
	// CatchupWindow overrides DefaultCatchupWindow.
	CatchupWindow time.Duration
	// ResyncInterval overrides DefaultResyncInterval.
	ResyncInterval time.Duration

	syncMu sync.Mutex
	kick   chan struct{}
	once   sync.Once
}

func (m *Manager) log() *slog.Logger {
	if m.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return m.Log
}

func (m *Manager) prefix() string { return workflows.ScheduleIDPrefix(m.TaskQueue) }

// ScheduleID is the Temporal Schedule id of an agent.
func (m *Manager) ScheduleID(agentID string) string {
	return workflows.ScheduleID(m.TaskQueue, agentID)
}

func (m *Manager) catchup() time.Duration {
	if m.CatchupWindow > 0 {
		return m.CatchupWindow
	}
	return DefaultCatchupWindow
}

// Scheduled reports whether a definition is a scheduled agent.
func Scheduled(d *agentdef.Definition) bool {
	return d.Trigger == agentdef.TriggerCron && d.Schedule != nil && strings.TrimSpace(d.Schedule.Cron) != ""
}

// desired is what one schedule should look like.
type desired struct {
	def    *agentdef.Definition
	spec   client.ScheduleSpec
	paused bool
	note   string
}

func (m *Manager) desire(d *agentdef.Definition) (desired, error) {
	spec, tz, err := Spec(d.Schedule)
	if err != nil {
		return desired{}, fmt.Errorf("agent %s: %w", d.ID, err)
	}
	paused := !d.IsEnabled()
	// The revision covers everything the schedule is made from, so a
	// changed definition (or gateway setting) updates it.
	parts := []any{d.Schedule.Cron, tz, m.TaskQueue, workflows.ScheduledAgentWorkflowName, m.catchup().String(), paused}
	if t := workflows.FiringExecutionTimeout(d.Approvals); t != workflows.FiringTimeout {
		// Only then, so schedules of agents without approvals keep their revision.
		parts = append(parts, "execution-timeout", t.String())
	}
	rev, _ := json.Marshal(parts)
	sum := sha256.Sum256(rev)
	note := fmt.Sprintf("managed by Agentry from agent %s (rev %s)", d.ID, hex.EncodeToString(sum[:6]))
	if paused {
		note += "; paused: the agent is disabled"
	}
	return desired{def: d, spec: spec, paused: paused, note: note}, nil
}

func (m *Manager) action(d *agentdef.Definition) *client.ScheduleWorkflowAction {
	agentID := d.ID
	id := m.ScheduleID(agentID)
	return &client.ScheduleWorkflowAction{
		ID:                       id, // Temporal appends the fire time
		Workflow:                 workflows.ScheduledAgentWorkflowName,
		Args:                     []any{workflows.ScheduledAgentInput{Version: workflows.ScheduledAgentInputVersion, AgentID: agentID, ScheduleID: id, Trigger: workflows.TriggerCron}},
		TaskQueue:                m.TaskQueue,
		WorkflowExecutionTimeout: workflows.FiringExecutionTimeout(d.Approvals),
		StaticSummary:            "Scheduled run of agent " + agentID,
		TypedSearchAttributes:    searchAttributes(agentID, workflows.TriggerCron),
	}
}

func searchAttributes(agentID, trigger string) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		workflows.SearchAttrAgentID.ValueSet(agentID),
		workflows.SearchAttrTrigger.ValueSet(trigger),
	)
}

// SyncReport says what a sync changed (schedule ids).
type SyncReport struct {
	Created   []string
	Updated   []string
	Deleted   []string
	Unchanged []string
}

// Sync makes Temporal's schedules match the scheduled agents: missing ones
// are created, changed ones updated (a disabled agent's schedule is
// paused), and schedules of this installation whose agent is gone or no
// longer cron are deleted. It is idempotent and safe to run from several
// processes.
func (m *Manager) Sync(ctx context.Context) (SyncReport, error) {
	m.syncMu.Lock()
	defer m.syncMu.Unlock()
	var rep SyncReport
	var errs []error
	want := map[string]bool{}
	for _, d := range m.Agents.List() {
		if !Scheduled(d) {
			continue
		}
		id := m.ScheduleID(d.ID)
		want[id] = true
		des, err := m.desire(d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changed, created, err := m.ensure(ctx, id, des)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("schedule %s: %w", id, err))
		case created:
			rep.Created = append(rep.Created, id)
		case changed:
			rep.Updated = append(rep.Updated, id)
		default:
			rep.Unchanged = append(rep.Unchanged, id)
		}
	}
	deleted, err := m.deleteOrphans(ctx, want)
	rep.Deleted = deleted
	if err != nil {
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// ensure creates or updates one schedule.
func (m *Manager) ensure(ctx context.Context, id string, des desired) (changed, created bool, err error) {
	sc := m.Client.ScheduleClient()
	h := sc.GetHandle(ctx, id)
	desc, err := h.Describe(ctx)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		_, err = sc.Create(ctx, client.ScheduleOptions{
			ID:            id,
			Spec:          des.spec,
			Action:        m.action(des.def),
			Overlap:       enumspb.SCHEDULE_OVERLAP_POLICY_SKIP,
			CatchupWindow: m.catchup(),
			Paused:        des.paused,
			Note:          des.note,
			Memo:          map[string]any{"agentry_agent_id": des.def.ID, "agentry_task_queue": m.TaskQueue},
		})
		if err == nil {
			return true, true, nil
		}
		if !errors.Is(err, temporal.ErrScheduleAlreadyRunning) {
			return false, false, fmt.Errorf("create: %w", err)
		}
		// Created meanwhile (another process): compare it below.
		if desc, err = h.Describe(ctx); err != nil {
			return false, false, fmt.Errorf("describe: %w", err)
		}
	} else if err != nil {
		return false, false, fmt.Errorf("describe: %w", err)
	}
	st := desc.Schedule.State
	if st != nil && st.Note == des.note && st.Paused == des.paused {
		return false, false, nil
	}
	err = h.Update(ctx, client.ScheduleUpdateOptions{DoUpdate: func(client.ScheduleUpdateInput) (*client.ScheduleUpdate, error) {
		spec := des.spec
		return &client.ScheduleUpdate{Schedule: &client.Schedule{
			Action: m.action(des.def),
			Spec:   &spec,
			Policy: &client.SchedulePolicies{Overlap: enumspb.SCHEDULE_OVERLAP_POLICY_SKIP, CatchupWindow: m.catchup()},
			State:  &client.ScheduleState{Note: des.note, Paused: des.paused},
		}}, nil
	}})
	if err != nil {
		return false, false, fmt.Errorf("update: %w", err)
	}
	// Pause state through its own calls as well: they are what the server
	// documents for it, and repeating them is harmless.
	if des.paused {
		err = h.Pause(ctx, client.SchedulePauseOptions{Note: des.note})
	} else if st == nil || st.Paused {
		err = h.Unpause(ctx, client.ScheduleUnpauseOptions{Note: des.note})
	}
	if err != nil {
		return false, false, fmt.Errorf("pause state: %w", err)
	}
	return true, false, nil
}

// deleteOrphans deletes this installation's schedules that no agent wants.
// Listing is eventually consistent: a schedule created moments ago may be
// missing from it, which is harmless here (it is wanted), and one deleted
// moments ago may still be listed (deleting it again is a no-op).
func (m *Manager) deleteOrphans(ctx context.Context, want map[string]bool) ([]string, error) {
	iter, err := m.Client.ScheduleClient().List(ctx, client.ScheduleListOptions{PageSize: 200})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	var deleted []string
	var errs []error
	for iter.HasNext() {
		e, err := iter.Next()
		if err != nil {
			return deleted, fmt.Errorf("list schedules: %w", err)
		}
		if !m.owns(e.ID) || want[e.ID] {
			continue
		}
		err = m.Client.ScheduleClient().GetHandle(ctx, e.ID).Delete(ctx)
		var nf *serviceerror.NotFound
		if err != nil && !errors.As(err, &nf) {
			errs = append(errs, fmt.Errorf("delete orphan schedule %s: %w", e.ID, err))
			continue
		}
		if err == nil {
			deleted = append(deleted, e.ID)
		}
	}
	return deleted, errors.Join(errs...)
}

// owns reports whether a schedule id is one of this installation's: the
// prefix followed by a valid agent id.
func (m *Manager) owns(id string) bool {
	rest, ok := strings.CutPrefix(id, m.prefix())
	return ok && rest != "" && !strings.ContainsAny(rest, ": /")
}

// Notify asks for a sync soon (registry OnChange); it never blocks.
func (m *Manager) Notify() {
	m.once.Do(m.init)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

func (m *Manager) init() { m.kick = make(chan struct{}, 1) }

// Run syncs now, after every Notify and every ResyncInterval until ctx
// ends. Failures are logged and retried at the next occasion.
func (m *Manager) Run(ctx context.Context) {
	m.once.Do(m.init)
	every := m.ResyncInterval
	if every <= 0 {
		every = DefaultResyncInterval
	}
	t := time.NewTicker(every)
	defer t.Stop()
	m.syncLogged(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.kick:
		case <-t.C:
		}
		m.syncLogged(ctx)
	}
}

func (m *Manager) syncLogged(ctx context.Context) {
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rep, err := m.Sync(sctx)
	if err != nil && ctx.Err() == nil {
		m.log().Warn("schedules: sync incomplete; retrying later", "err", err)
	}
	if len(rep.Created)+len(rep.Updated)+len(rep.Deleted) > 0 {
		m.log().Info("schedules synced", "created", rep.Created, "updated", rep.Updated, "deleted", rep.Deleted)
	}
}

// Outcome is the last firing of a schedule.
type Outcome struct {
	At             time.Time  `json:"at"`
	FinishedAt     *time.Time `json:"finished_at,omitempty"`
	Status         string     `json:"status"`
	WaitingFor     string     `json:"waiting_for,omitempty"`
	Error          string     `json:"error"`
	Code           string     `json:"code,omitempty"`
	Trigger        string     `json:"trigger"`
	WorkflowID     string     `json:"workflow_id"`
	DeliveryID     string     `json:"delivery_id,omitempty"`
	DeliveryStatus string     `json:"delivery_status,omitempty"`
}

// View is one schedule as GET /schedules shows it.
type View struct {
	AgentID    string `json:"agent_id"`
	ScheduleID string `json:"schedule_id"`
	Cron       string `json:"cron"`
	Timezone   string `json:"timezone"`
	Paused     bool   `json:"paused"`
	// Synced is false while Temporal does not have the schedule yet (next
	// fire times are then computed locally).
	Synced        bool        `json:"synced"`
	NextFireTimes []time.Time `json:"next_fire_times"`
	OutputChannel string      `json:"output_channel,omitempty"`
	LastOutcome   *Outcome    `json:"last_outcome"`
}

// nextShown is how many next fire times List returns.
const nextShown = 5

// List returns the schedules of the scheduled agents, sorted by agent id,
// with next fire times (from Temporal) and the last firing's outcome.
func (m *Manager) List(ctx context.Context) ([]View, error) {
	var defs []*agentdef.Definition
	var ids []string
	for _, d := range m.Agents.List() {
		if Scheduled(d) {
			defs = append(defs, d)
			ids = append(ids, d.ID)
		}
	}
	last, err := m.Store.LastScheduleRuns(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]View, 0, len(defs))
	for _, d := range defs {
		_, tz, _ := Spec(d.Schedule)
		v := View{AgentID: d.ID, ScheduleID: m.ScheduleID(d.ID), Cron: d.Schedule.Cron, Timezone: tz, Paused: !d.IsEnabled(),
			OutputChannel: d.Schedule.Output.Channel, NextFireTimes: []time.Time{}}
		desc, err := m.Client.ScheduleClient().GetHandle(ctx, v.ScheduleID).Describe(ctx)
		var nf *serviceerror.NotFound
		switch {
		case err == nil:
			v.Synced = true
			if desc.Schedule.State != nil {
				v.Paused = desc.Schedule.State.Paused
			}
			if !v.Paused {
				for i, t := range desc.Info.NextActionTimes {
					if i == nextShown {
						break
					}
					v.NextFireTimes = append(v.NextFireTimes, t.UTC())
				}
			}
		case errors.As(err, &nf):
			if !v.Paused {
				v.NextFireTimes = append(v.NextFireTimes, NextTimes(d.Schedule, time.Now(), nextShown)...)
			}
		default:
			return nil, fmt.Errorf("%w (describe %s: %v)", ErrUnavailable, v.ScheduleID, err)
		}
		if r, ok := last[d.ID]; ok {
			o := &Outcome{At: r.StartedAt.UTC(), FinishedAt: r.FinishedAt, Status: r.Status, WaitingFor: r.WaitingFor, Error: r.Error, Code: r.Code, Trigger: r.Trigger,
				WorkflowID: r.WorkflowID, DeliveryID: r.DeliveryID}
			if r.DeliveryID != "" {
				if dl, _, err := m.Store.GetDelivery(ctx, r.DeliveryID); err == nil {
					o.DeliveryStatus = dl.Status
				}
			}
			v.LastOutcome = o
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AgentID < out[j].AgentID })
	return out, nil
}

// Trigger runs a scheduled agent now (outside its schedule) and returns
// the firing's workflow id. It runs even while a scheduled firing is in
// progress.
func (m *Manager) Trigger(ctx context.Context, agentID string) (string, error) {
	d, ok := m.Agents.Get(agentID)
	if !ok || !Scheduled(d) {
		return "", fmt.Errorf("%w: %s", ErrNoSchedule, agentID)
	}
	if !d.IsEnabled() {
		return "", fmt.Errorf("%w: %s", ErrAgentDisabled, agentID)
	}
	sid := m.ScheduleID(agentID)
	wid := workflows.ManualFiringWorkflowID(sid, time.Now())
	_, err := m.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       wid,
		TaskQueue:                m.TaskQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: workflows.FiringExecutionTimeout(d.Approvals),
		StaticSummary:            "Manual run of scheduled agent " + agentID,
		TypedSearchAttributes:    searchAttributes(agentID, workflows.TriggerManual),
	}, workflows.ScheduledAgentWorkflowName, workflows.ScheduledAgentInput{Version: workflows.ScheduledAgentInputVersion, AgentID: agentID, ScheduleID: sid, Trigger: workflows.TriggerManual})
	if err != nil {
		return "", fmt.Errorf("%w (%v)", ErrUnavailable, err)
	}
	return wid, nil
}
