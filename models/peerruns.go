package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Peer runs (docs/teams.md): a run of a peer agent that another run
// delegated to (ask_<peer>), driven by the PeerRun child workflow. Its own
// record, apart from task_runs: a task has one run at a time (the active
// run index) and a task's attempts are numbered; a tree of delegations is
// neither. The tree is held together by RootRunID, the ledger run id of the
// root run (TaskRunLedgerID, a firing's id), which the peer's LLM calls
// also carry (cost_ledger.root_run_id).

// Event types of delegation, appended on the root task's run (TaskID, RunID
// of the root when it is a task run) with parent and child ids in the
// payload.
const (
	EventRunChildStarted  = "run.child_started"
	EventRunChildFinished = "run.child_finished"
)

// PeerRun is one delegated run.
type PeerRun struct {
	ID int64 `gorm:"primaryKey;autoIncrement"`
	// WorkflowID is the child workflow's id (<parent run key>-peer-<turn>-<index>):
	// a retried or replayed delegation finds this row again.
	WorkflowID       string `gorm:"size:191;not null;uniqueIndex"`
	ParentWorkflowID string `gorm:"size:191;index"`
	// ParentRunID and RootRunID are ledger run ids (TaskRunLedgerID,
	// PeerRunLedgerID, a firing's id).
	ParentRunID string `gorm:"size:64"`
	RootRunID   string `gorm:"size:64;index"`
	// RootTaskID and RootTaskRunID name the root when it is a task run
	// (0 otherwise).
	RootTaskID    int64  `gorm:"index"`
	RootTaskRunID int64  `gorm:"index"`
	AgentID       string `gorm:"size:100;index"`
	Depth         int
	Status        string `gorm:"size:16;not null;index"`
	WaitingFor    string `gorm:"size:16"`
	// Ask is the task the parent gave (capped).
	Ask          string
	Snapshot     string `gorm:"size:64"`
	Reply        string
	Error        string
	StopReason   string `gorm:"size:32"`
	Turns        int
	InputTokens  int64
	OutputTokens int64
	// CostMicros is the ledger's cost of the run's own LLM calls, summed when it ends.
	CostMicros int64
	CreatedAt  time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
	UpdatedAt  time.Time
}

// PeerRunLedgerID is the llm.CallMeta.RunID of a peer run's LLM calls.
func PeerRunLedgerID(id int64) string { return "peerrun-" + strconv.FormatInt(id, 10) }

// LedgerID is the run's ledger run id.
func (p PeerRun) LedgerID() string { return PeerRunLedgerID(p.ID) }

// MarshalJSON writes the API form of a peer run.
func (p PeerRun) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		ID               int64      `json:"id"`
		RunID            string     `json:"run_id"`
		WorkflowID       string     `json:"workflow_id"`
		ParentWorkflowID string     `json:"parent_workflow_id"`
		ParentRunID      string     `json:"parent_run_id"`
		RootRunID        string     `json:"root_run_id"`
		AgentID          string     `json:"agent_id"`
		Depth            int        `json:"depth"`
		Status           string     `json:"status"`
		WaitingFor       string     `json:"waiting_for,omitempty"`
		Ask              string     `json:"task"`
		Reply            string     `json:"reply"`
		Error            string     `json:"error"`
		Turns            int        `json:"turns"`
		InputTokens      int64      `json:"input_tokens"`
		OutputTokens     int64      `json:"output_tokens"`
		CostMicros       int64      `json:"cost_micros"`
		CostUSD          float64    `json:"cost_usd"`
		CreatedAt        time.Time  `json:"created_at"`
		StartedAt        *time.Time `json:"started_at"`
		FinishedAt       *time.Time `json:"finished_at"`
	}{p.ID, p.LedgerID(), p.WorkflowID, p.ParentWorkflowID, p.ParentRunID, p.RootRunID, p.AgentID, p.Depth, p.Status, p.WaitingFor,
		p.Ask, p.Reply, p.Error, p.Turns, p.InputTokens, p.OutputTokens, p.CostMicros, float64(p.CostMicros) / 1e6,
		p.CreatedAt, p.StartedAt, p.FinishedAt})
}

// CreatePeerRun inserts the queued peer run, or returns the one already
// recorded under its workflow id (a retried step).
func (s *Store) CreatePeerRun(ctx context.Context, p *PeerRun) (*PeerRun, error) {
	now := time.Now().UTC()
	p.ID, p.Status, p.CreatedAt, p.UpdatedAt = 0, RunQueued, now, now
	if len(p.Ask) > MaxReplyBytes {
		p.Ask = truncateUTF8(p.Ask, MaxReplyBytes)
	}
	db := s.DB.WithContext(ctx)
	if err := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "workflow_id"}}, DoNothing: true}).Create(p).Error; err != nil {
		return nil, fmt.Errorf("record peer run %s: %w", p.WorkflowID, err)
	}
	var got PeerRun
	if err := db.Where("workflow_id = ?", p.WorkflowID).First(&got).Error; err != nil {
		return nil, fmt.Errorf("read peer run %s: %w", p.WorkflowID, err)
	}
	return &got, nil
}

// PeerRunByID reads a peer run.
func (s *Store) PeerRunByID(ctx context.Context, id int64) (*PeerRun, error) {
	var p PeerRun
	err := s.DB.WithContext(ctx).First(&p, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "peer run", ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("read peer run %d: %w", id, err)
	}
	return &p, nil
}

// PeerRunsOfRoot lists the peer runs of a run tree, oldest first.
func (s *Store) PeerRunsOfRoot(ctx context.Context, rootRunID string) ([]PeerRun, error) {
	var out []PeerRun
	if err := s.DB.WithContext(ctx).Where("root_run_id = ?", rootRunID).Order("id").Limit(1000).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list peer runs of %s: %w", rootRunID, err)
	}
	return out, nil
}

// PeerRunsOfTaskRuns lists the peer runs of the trees rooted at the given
// task runs, by root task run id.
func (s *Store) PeerRunsOfTaskRuns(ctx context.Context, runIDs []int64) (map[int64][]PeerRun, error) {
	out := map[int64][]PeerRun{}
	if len(runIDs) == 0 {
		return out, nil
	}
	var rows []PeerRun
	if err := s.DB.WithContext(ctx).Where("root_task_run_id IN ?", runIDs).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list peer runs: %w", err)
	}
	for _, r := range rows {
		out[r.RootTaskRunID] = append(out[r.RootTaskRunID], r)
	}
	return out, nil
}

// TreeCostMicros is the cost of a run tree: the ledger rows of the root
// run and of every peer run recorded under it. It reads the peer runs'
// own run ids rather than cost_ledger.root_run_id, so it holds for rows
// written before that column was filled (docs/teams.md).
func (s *Store) TreeCostMicros(ctx context.Context, rootRunID string) (int64, error) {
	var cost int64
	err := s.DB.WithContext(ctx).Model(&LedgerEntry{}).
		Where("run_id = ? OR run_id IN (?)", rootRunID,
			s.DB.Model(&PeerRun{}).Select("'peerrun-' || CAST(id AS TEXT)").Where("root_run_id = ?", rootRunID)).
		Select("COALESCE(SUM(cost_micros), 0)").Scan(&cost).Error
	if err != nil {
		return 0, fmt.Errorf("cost of run tree %s: %w", rootRunID, err)
	}
	return cost, nil
}

// MarkPeerRunStarted moves a queued peer run to running. A run that ended
// gives ErrRunNotActive; repeating it changes nothing.
func (s *Store) MarkPeerRunStarted(ctx context.Context, id int64) error {
	p, err := s.PeerRunByID(ctx, id)
	if err != nil {
		return err
	}
	if !RunActive(p.Status) {
		return &ConflictError{Code: ErrRunNotActive.Code, RunID: id, Msg: fmt.Sprintf("peer run %d already ended (%s)", id, p.Status)}
	}
	now := time.Now().UTC()
	return s.DB.WithContext(ctx).Model(&PeerRun{}).Where("id = ? AND status = ?", id, RunQueued).
		Updates(map[string]any{"status": RunRunning, "started_at": now, "updated_at": now}).Error
}

// SetPeerRunWaiting records that a peer run parks (waitingFor non-empty)
// or resumes.
func (s *Store) SetPeerRunWaiting(ctx context.Context, id int64, waitingFor string) error {
	status := RunRunning
	if waitingFor != "" {
		status = RunWaiting
	}
	return s.DB.WithContext(ctx).Model(&PeerRun{}).Where("id = ? AND status IN ?", id, []string{RunRunning, RunWaiting, RunQueued}).
		Updates(map[string]any{"status": status, "waiting_for": waitingFor, "updated_at": time.Now().UTC()}).Error
}

// SetPeerRunCostCapWait records that a peer run parks for its tree's cost
// cap (parking) or resumes from it, like ParkRun/ResumeRun do for a task
// run: run.waiting or run.resumed on the root task's run (once per peer
// run and turn: dedupe key) and, when the tree's root is a task run, the
// root task to needs_review with a comment saying what was spent (back to
// running on resume). Repeating it changes nothing.
func (s *Store) SetPeerRunCostCapWait(ctx context.Context, id int64, w RunWait, parking bool) error {
	return s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row PeerRun
		if err := tx.First(&row, id).Error; errors.Is(err, gorm.ErrRecordNotFound) {
			return &NotFoundError{Kind: "peer run", ID: id}
		} else if err != nil {
			return fmt.Errorf("read peer run %d: %w", id, err)
		}
		from, to, waitingFor, event := []string{RunQueued, RunRunning, RunWaiting}, RunWaiting, WaitingForCostCap, EventRunWaiting
		payload := map[string]any{"waiting_for": WaitingForCostCap, "turn": w.Turn, "code": w.Code, "reason": truncateUTF8(w.Reason, 2000)}
		q := tx.Model(&PeerRun{}).Where("id = ?", id)
		if !parking {
			from, to, waitingFor, event = []string{RunWaiting}, RunRunning, "", EventRunResumed
			payload = map[string]any{"waiting_for": WaitingForCostCap, "turn": w.Turn, "waited_ms": w.Waited.Milliseconds()}
			q = q.Where("waiting_for = ?", WaitingForCostCap)
		}
		res := q.Where("status IN ?", from).Updates(map[string]any{"status": to, "waiting_for": waitingFor, "updated_at": time.Now().UTC()})
		if res.Error != nil {
			return fmt.Errorf("peer run %d to %s: %w", id, to, res.Error)
		}
		if res.RowsAffected == 0 || row.RootTaskID == 0 {
			return nil
		}
		payload["peer_run_id"], payload["peer"], payload["child_workflow_id"], payload["child_run_id"] = row.ID, row.AgentID, row.WorkflowID, row.LedgerID()
		ev := NewEvent(event, fmt.Sprintf("%s:peer%d:t%d:%s", event, row.ID, w.Turn, WaitingForCostCap), payload)
		ev.TaskID, ev.RunID, ev.AgentID = row.RootTaskID, row.RootTaskRunID, row.AgentID
		fresh, err := insertEvent(tx, s.Driver, &ev)
		if err != nil || !fresh {
			return err
		}
		return costCapTask(tx, s.Driver, row.RootTaskID, fmt.Sprintf("Peer run %d (agent %s, delegated by run %d)", row.ID, row.AgentID, row.RootTaskRunID), w, parking)
	})
}

// PeerRunsWaitingFor lists the peer runs parked for waitingFor now.
func (s *Store) PeerRunsWaitingFor(ctx context.Context, waitingFor string) ([]PeerRun, error) {
	var runs []PeerRun
	if err := s.DB.WithContext(ctx).Where("status = ? AND waiting_for = ?", RunWaiting, waitingFor).Order("id").Find(&runs).Error; err != nil {
		return nil, fmt.Errorf("list peer runs waiting for %s: %w", waitingFor, err)
	}
	return runs, nil
}

// FinishPeerRun records the end of a peer run (the first outcome wins;
// applied is false for a repeat) with its cost summed from the ledger.
func (s *Store) FinishPeerRun(ctx context.Context, id int64, o RunOutcome) (p *PeerRun, applied bool, err error) {
	if len(o.Reply) > MaxReplyBytes {
		o.Reply = truncateUTF8(o.Reply, MaxReplyBytes)
	}
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var row PeerRun
		if err := tx.First(&row, id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return &NotFoundError{Kind: "peer run", ID: id}
			}
			return err
		}
		p = &row
		if !RunActive(row.Status) {
			return nil
		}
		var cost int64
		if err := tx.Model(&LedgerEntry{}).Where("run_id = ?", row.LedgerID()).
			Select("COALESCE(SUM(cost_micros), 0)").Scan(&cost).Error; err != nil {
			return fmt.Errorf("finish peer run %d: cost: %w", id, err)
		}
		now := time.Now().UTC()
		row.Status, row.Error, row.Reply, row.StopReason = o.Status, o.Error, o.Reply, o.StopReason
		row.Turns, row.InputTokens, row.OutputTokens, row.CostMicros = o.Turns, o.InputTokens, o.OutputTokens, cost
		row.FinishedAt, row.UpdatedAt, row.WaitingFor = &now, now, ""
		applied = true
		return tx.Model(&PeerRun{}).Where("id = ?", id).Updates(map[string]any{
			"status": row.Status, "error": row.Error, "reply": row.Reply, "stop_reason": row.StopReason, "turns": row.Turns,
			"input_tokens": row.InputTokens, "output_tokens": row.OutputTokens, "cost_micros": cost,
			"finished_at": now, "updated_at": now, "waiting_for": "",
		}).Error
	})
	return p, applied, err
}

// WithTrees fills the runs' trees for the API: the peer runs under each
// (Children, oldest first) and the tree's cost (TreeCostMicros). A run
// without peer runs gets its own cost as the tree's; an active one reads
// its own cost from the ledger so far.
func (s *Store) WithTrees(ctx context.Context, runs []TaskRun) error {
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.ID
	}
	kids, err := s.PeerRunsOfTaskRuns(ctx, ids)
	if err != nil {
		return err
	}
	for i := range runs {
		r := &runs[i]
		if RunActive(r.Status) {
			if err := s.DB.WithContext(ctx).Model(&LedgerEntry{}).Where("run_id = ?", TaskRunLedgerID(r.ID)).
				Select("COALESCE(SUM(cost_micros), 0)").Scan(&r.CostMicros).Error; err != nil {
				return fmt.Errorf("cost of run %d: %w", r.ID, err)
			}
		}
		r.Children = kids[r.ID]
		tree := r.CostMicros
		if len(r.Children) > 0 {
			if tree, err = s.TreeCostMicros(ctx, TaskRunLedgerID(r.ID)); err != nil {
				return err
			}
		}
		r.TreeCostMicros = &tree
	}
	return nil
}
