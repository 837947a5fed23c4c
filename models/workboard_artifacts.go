package models

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// NewArtifact is a file a run produced.
type NewArtifact struct {
	RunID     int64
	Path      string
	Name      string
	SizeBytes int64
	Tool      string
	// DedupeKey names the occurrence (the tool call that wrote the file), so
	// a retried tool activity emits its run.artifact event once.
	DedupeKey string
}

// RecordArtifact attaches a file to the run's task (one record per run and
// path; writing the file again updates its size) with a run.artifact
// event. It reports whether the event was new.
func (s *Store) RecordArtifact(ctx context.Context, na NewArtifact) (*Artifact, bool, error) {
	var art Artifact
	var inserted bool
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		run, err := runByID(tx, na.RunID)
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		row := Artifact{TaskID: run.TaskID, RunID: run.ID, Path: na.Path, Name: na.Name, SizeBytes: na.SizeBytes, Tool: na.Tool,
			CreatedAt: now, UpdatedAt: now}
		if err := tx.Clauses(clause.OnConflict{
			Columns:   []clause.Column{{Name: "run_id"}, {Name: "path"}},
			DoUpdates: clause.Assignments(map[string]any{"size_bytes": na.SizeBytes, "tool": na.Tool, "updated_at": now}),
		}).Create(&row).Error; err != nil {
			return fmt.Errorf("record artifact of run %d: %w", run.ID, err)
		}
		if err := tx.Where("run_id = ? AND path = ?", run.ID, na.Path).First(&art).Error; err != nil {
			return fmt.Errorf("read artifact of run %d: %w", run.ID, err)
		}
		ev := runEvent(EventRunArtifact, na.DedupeKey, run, map[string]any{
			"artifact_id": art.ID, "path": art.Path, "name": art.Name, "size_bytes": art.SizeBytes, "tool": art.Tool,
		})
		inserted, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return &art, inserted, nil
}

// GetArtifact returns an artifact record.
func (s *Store) GetArtifact(ctx context.Context, id int64) (*Artifact, error) {
	var a Artifact
	err := s.DB.WithContext(ctx).First(&a, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &NotFoundError{Kind: "artifact", ID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("read artifact %d: %w", id, err)
	}
	return &a, nil
}

// ListArtifacts returns a page of a task's artifacts in id order, the
// total number of its artifacts and the next page's cursor.
func (s *Store) ListArtifacts(ctx context.Context, taskID int64, p Page) ([]Artifact, int64, int64, error) {
	return listOfTask[Artifact](ctx, s, taskID, p, "artifacts", func(a Artifact) int64 { return a.ID })
}

// ListComments returns a page of a task's comments, oldest first, the
// total number of its comments and the next page's cursor.
func (s *Store) ListComments(ctx context.Context, taskID int64, p Page) ([]Comment, int64, int64, error) {
	return listOfTask[Comment](ctx, s, taskID, p, "comments", func(c Comment) int64 { return c.ID })
}

func listOfTask[T any](ctx context.Context, s *Store, taskID int64, p Page, what string, id func(T) int64) ([]T, int64, int64, error) {
	if _, err := s.GetTask(ctx, taskID); err != nil {
		return nil, 0, 0, err
	}
	limit := p.limit()
	var rows []T
	if err := s.DB.WithContext(ctx).Where("task_id = ? AND id > ?", taskID, p.Cursor).Order("id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("list %s of task %d: %w", what, taskID, err)
	}
	var total int64
	if err := s.DB.WithContext(ctx).Model(new(T)).Where("task_id = ?", taskID).Count(&total).Error; err != nil {
		return nil, 0, 0, fmt.Errorf("count %s of task %d: %w", what, taskID, err)
	}
	rows, next, err := pageOf(rows, limit, id)
	return rows, total, next, err
}

// NewComment is a comment to add.
type NewComment struct {
	Author string
	Body   string
	// Kind is note (default) or review.
	Kind string
	// Decision, on a review of a task in needs_review, is accept (the task
	// moves to done) or reject (back to todo).
	Decision string
}

func (nc *NewComment) validate() error {
	nc.Author = strings.TrimSpace(nc.Author)
	if utf8.RuneCountInString(nc.Author) > MaxAuthorRunes {
		return invalidField("author", "is longer than %d characters", MaxAuthorRunes)
	}
	if strings.TrimSpace(nc.Body) == "" {
		return invalidField("body", "must not be empty")
	}
	if len(nc.Body) > MaxCommentBytes {
		return invalidField("body", "is longer than %d bytes", MaxCommentBytes)
	}
	nc.Kind = strings.ToLower(strings.TrimSpace(nc.Kind))
	if nc.Kind == "" {
		nc.Kind = CommentNote
	}
	if nc.Kind != CommentNote && nc.Kind != CommentReview {
		return invalidField("kind", "%q is not one of note, review", nc.Kind)
	}
	nc.Decision = strings.ToLower(strings.TrimSpace(nc.Decision))
	switch nc.Decision {
	case "":
	case DecisionAccept, DecisionReject:
		if nc.Kind != CommentReview {
			return invalidField("decision", "is only allowed on comments of kind review")
		}
	default:
		return invalidField("decision", "%q is not one of accept, reject", nc.Decision)
	}
	return nil
}

// CreateComment adds a comment to a task. A review with a decision decides
// a task in needs_review (accept -> done, reject -> todo) in the same
// transaction; on a task in another status it is refused with
// ErrNotInReview. The task is returned as it is afterwards.
func (s *Store) CreateComment(ctx context.Context, taskID int64, nc NewComment) (*Comment, *Task, error) {
	if err := nc.validate(); err != nil {
		return nil, nil, err
	}
	var c Comment
	var t *Task
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var err error
		if t, err = s.lockTask(tx, taskID); err != nil {
			return err
		}
		var moved bool
		if nc.Decision != "" {
			if t.Status != TaskNeedsReview {
				return &ConflictError{Code: ErrNotInReview.Code,
					Msg: fmt.Sprintf("task %d is not awaiting review (status %s); a review decision needs status needs_review", taskID, t.Status)}
			}
			t.Status = TaskDone
			if nc.Decision == DecisionReject {
				t.Status = TaskTodo
			}
			t.UpdatedAt = time.Now().UTC()
			if err := tx.Model(&Task{}).Where("id = ?", taskID).Updates(map[string]any{"status": t.Status, "updated_at": t.UpdatedAt}).Error; err != nil {
				return fmt.Errorf("decide task %d: %w", taskID, err)
			}
			moved = true
		}
		c = Comment{TaskID: taskID, Author: nc.Author, Body: nc.Body, Kind: nc.Kind, Decision: nc.Decision, CreatedAt: time.Now().UTC()}
		if err := tx.Create(&c).Error; err != nil {
			return fmt.Errorf("insert comment on task %d: %w", taskID, err)
		}
		ev := NewEvent(EventCommentCreated, fmt.Sprintf("comment.created:%d", c.ID), map[string]any{
			"comment_id": c.ID, "author": c.Author, "kind": c.Kind, "decision": c.Decision,
		})
		ev.TaskID, ev.AgentID = t.ID, t.AgentID
		if _, err := insertEvent(tx, s.Driver, &ev); err != nil {
			return err
		}
		if moved {
			up := taskEvent(EventTaskUpdated, "", t, []string{"status"})
			if _, err := insertEvent(tx, s.Driver, &up); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return &c, t, nil
}

// DeleteComment removes a comment. A decision it carried is not undone.
func (s *Store) DeleteComment(ctx context.Context, id int64) error {
	return s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var c Comment
		err := tx.First(&c, id).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return &NotFoundError{Kind: "comment", ID: id}
		}
		if err != nil {
			return fmt.Errorf("read comment %d: %w", id, err)
		}
		if err := tx.Delete(&Comment{}, id).Error; err != nil {
			return fmt.Errorf("delete comment %d: %w", id, err)
		}
		var agentID string
		if t, err := getTask(tx, c.TaskID); err == nil {
			agentID = t.AgentID
		}
		ev := NewEvent(EventCommentDeleted, fmt.Sprintf("comment.deleted:%d", id), map[string]any{"comment_id": id})
		ev.TaskID, ev.AgentID = c.TaskID, agentID
		_, err = insertEvent(tx, s.Driver, &ev)
		return err
	})
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
