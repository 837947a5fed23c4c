package models

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// CreateTask validates f and inserts a task (status todo and priority
// normal unless given), with its task.created event.
func (s *Store) CreateTask(ctx context.Context, f TaskFields) (*Task, error) {
	if f.Title == nil {
		return nil, invalidField("title", "is required")
	}
	t := Task{Status: TaskTodo, Priority: PriorityNormal, Tags: "[]"}
	if _, err := f.apply(&t); err != nil {
		return nil, err
	}
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&t).Error; err != nil {
			return fmt.Errorf("insert task: %w", err)
		}
		ev := taskEvent(EventTaskCreated, fmt.Sprintf("task.created:%d", t.ID), &t, nil)
		_, err := insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &t, nil
}

func taskEvent(typ, key string, t *Task, changed []string) Event {
	payload := map[string]any{"task": t}
	if changed != nil {
		payload["changed"] = changed
	}
	ev := NewEvent(typ, key, payload)
	ev.TaskID, ev.AgentID = t.ID, t.AgentID
	return ev
}

// GetTask returns a task.
func (s *Store) GetTask(ctx context.Context, id int64) (*Task, error) {
	return getTask(s.DB.WithContext(ctx), id)
}

func getTask(db *gorm.DB, id int64) (*Task, error) {
	var t Task
	err := db.First(&t, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "task", ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("read task %d: %w", id, err)
	}
	return &t, nil
}

// lockTask reads a task inside tx and keeps others from changing it (or
// its runs) until tx ends. SQLite transactions here hold the database's
// write lock from BEGIN, so only PostgreSQL needs the row lock.
func (s *Store) lockTask(tx *gorm.DB, id int64) (*Task, error) {
	if s.Driver == DriverPostgres {
		tx = tx.Clauses(clause.Locking{Strength: "UPDATE"})
	}
	return getTask(tx, id)
}

// UpdateTask applies the sent fields. A change writes a task.updated event
// naming the changed fields; a patch that changes nothing writes nothing.
func (s *Store) UpdateTask(ctx context.Context, id int64, f TaskFields) (*Task, error) {
	var t *Task
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if t, err = s.lockTask(tx, id); err != nil {
			return err
		}
		changed, err := f.apply(t)
		if err != nil || len(changed) == 0 {
			return err
		}
		t.UpdatedAt = time.Now().UTC()
		if err := tx.Model(&Task{}).Where("id = ?", id).Updates(map[string]any{
			"title": t.Title, "description": t.Description, "agent_id": t.AgentID, "status": t.Status, "owner": t.Owner,
			"priority": t.Priority, "tags": t.Tags, "due_at": t.DueAt, "max_cost_micros": t.MaxCostMicros, "updated_at": t.UpdatedAt,
		}).Error; err != nil {
			return fmt.Errorf("update task %d: %w", id, err)
		}
		ev := taskEvent(EventTaskUpdated, "", t, changed)
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// DeleteTask removes a task with its comments, runs and artifact records.
// A task with an active run is refused (ErrRunActive): cancel the run
// first. The deleted task is returned so the caller can remove its files.
func (s *Store) DeleteTask(ctx context.Context, id int64) (*Task, error) {
	var t *Task
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if t, err = s.lockTask(tx, id); err != nil {
			return err
		}
		if run, err := activeRun(tx, id); err == nil {
			return &ConflictError{Code: ErrRunActive.Code, RunID: run.ID,
				Msg: fmt.Sprintf("task %d has an active run (run %d, %s); cancel it first with POST /api/v1/workboard/tasks/%d/runs/%d/cancel", id, run.ID, run.Status, id, run.ID)}
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		for _, m := range []any{&Comment{}, &Artifact{}, &TaskRun{}} {
			if err := tx.Where("task_id = ?", id).Delete(m).Error; err != nil {
				return fmt.Errorf("delete task %d: %w", id, err)
			}
		}
		if err := tx.Delete(&Task{}, id).Error; err != nil {
			return fmt.Errorf("delete task %d: %w", id, err)
		}
		ev := NewEvent(EventTaskDeleted, fmt.Sprintf("task.deleted:%d", id), map[string]any{"task": t})
		ev.TaskID, ev.AgentID = t.ID, t.AgentID
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// ListTasks returns a page of tasks in id order (creation order) and the
// cursor of the next page (0 when this is the last).
func (s *Store) ListTasks(ctx context.Context, f TaskFilter) ([]Task, int64, error) {
	if f.Status != "" && !slices.Contains(TaskStatuses(), f.Status) {
		return nil, 0, invalidField("status", "%q is not one of %s", f.Status, strings.Join(TaskStatuses(), ", "))
	}
	limit := f.Page.limit()
	q := s.DB.WithContext(ctx).Where("id > ?", f.Page.Cursor)
	if f.Status != "" {
		q = q.Where("status = ?", f.Status)
	}
	if f.AgentID != "" {
		q = q.Where("agent_id = ?", f.AgentID)
	}
	var tasks []Task
	if err := q.Order("id").Limit(limit + 1).Find(&tasks).Error; err != nil {
		return nil, 0, fmt.Errorf("list tasks: %w", err)
	}
	return pageOf(tasks, limit, func(t Task) int64 { return t.ID })
}

// pageOf trims a limit+1 result to limit rows and returns the cursor of
// the next page (0 when there is none).
func pageOf[T any](rows []T, limit int, id func(T) int64) ([]T, int64, error) {
	if rows == nil {
		rows = []T{}
	}
	if len(rows) <= limit {
		return rows, 0, nil
	}
	rows = rows[:limit]
	return rows, id(rows[limit-1]), nil
}
