package chat

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentryhq/agentry/models"
)

// FeedbackRequest is a vote on one response.
type FeedbackRequest struct {
	AgentID    string `json:"agent_id"`
	SessionID  string `json:"session_id"`
	RunID      string `json:"run_id"`
	ResponseID string `json:"response_id"`
	Rating     int    `json:"rating"`
	Comment    string `json:"comment,omitempty"`
}

// FeedbackResult is what was stored.
type FeedbackResult struct {
	ID         int64  `json:"id"`
	ResponseID string `json:"response_id"`
	Rating     int    `json:"rating"`
	Comment    string `json:"comment,omitempty"`
	// ProposalID is the pending learning proposal created from the comment.
	ProposalID *int64 `json:"proposal_id,omitempty"`
	Updated    bool   `json:"updated"`
}

// Feedback upserts the caller's vote on a response. With the action log
// enabled the agent/session/run/response tuple must match a recorded run.
func (s *Service) Feedback(ctx context.Context, req FeedbackRequest) (*FeedbackResult, error) {
	for field, v := range map[string]string{"agent_id": req.AgentID, "session_id": req.SessionID, "run_id": req.RunID, "response_id": req.ResponseID} {
		if strings.TrimSpace(v) == "" {
			return nil, invalid(field, "is required")
		}
	}
	if req.Rating != 1 && req.Rating != -1 {
		return nil, invalid("rating", "must be 1 (helpful) or -1 (unhelpful), got %d", req.Rating)
	}
	if len(req.Comment) > 4000 {
		return nil, invalid("comment", "is longer than 4000 characters")
	}
	if s.Config.Runtime.ActionLog.Enabled {
		if _, err := s.Store.FindRun(ctx, req.AgentID, req.SessionID, req.RunID, req.ResponseID); err != nil {
			if errors.Is(err, models.ErrNotFound) {
				return nil, ErrResponseNotFound
			}
			return nil, err
		}
	}
	fb := &models.Feedback{Subject: subjectOf(ctx), ResponseID: req.ResponseID, AgentID: req.AgentID, SessionID: req.SessionID,
		RunID: req.RunID, Rating: req.Rating, Comment: strings.TrimSpace(req.Comment)}
	stored, prop, err := s.Store.UpsertFeedback(ctx, fb)
	if err != nil {
		return nil, fmt.Errorf("store feedback: %w", err)
	}
	res := &FeedbackResult{ID: stored.ID, ResponseID: stored.ResponseID, Rating: stored.Rating, Comment: stored.Comment,
		Updated: stored.UpdatedAt.After(stored.CreatedAt)}
	if prop != nil {
		res.ProposalID = &prop.ID
	}
	return res, nil
}

// FeedbackEntry is one row of the learning feedback list.
type FeedbackEntry struct {
	ResponseID     string  `json:"response_id"`
	AgentID        string  `json:"agent_id"`
	SessionID      string  `json:"session_id"`
	RunID          string  `json:"run_id"`
	Subject        string  `json:"subject"`
	Rating         int     `json:"rating"`
	Comment        string  `json:"comment,omitempty"`
	UpdatedAt      string  `json:"updated_at"`
	ProposalID     *int64  `json:"proposal_id,omitempty"`
	ProposalStatus *string `json:"proposal_status,omitempty"`
}

// ListFeedback returns the newest feedback entries.
func (s *Service) ListFeedback(ctx context.Context, agentID string, limit int) ([]FeedbackEntry, error) {
	rows, err := s.Store.ListFeedback(ctx, agentID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]FeedbackEntry, 0, len(rows))
	for _, r := range rows {
		out = append(out, FeedbackEntry{ResponseID: r.ResponseID, AgentID: r.AgentID, SessionID: r.SessionID, RunID: r.RunID,
			Subject: r.Subject, Rating: r.Rating, Comment: r.Comment, UpdatedAt: r.UpdatedAt.UTC().Format("2006-01-02T15:04:05Z07:00"),
			ProposalID: r.ProposalID, ProposalStatus: r.ProposalStatus})
	}
	return out, nil
}
