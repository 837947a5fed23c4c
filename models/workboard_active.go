package models

import (
	"context"
	"fmt"
)

// CountActiveRuns counts the task runs queued, running or waiting now (the
// agentry_runs_active gauge).
func (s *Store) CountActiveRuns(ctx context.Context) (int64, error) {
	var n int64
	if err := s.DB.WithContext(ctx).Model(&TaskRun{}).Where("status IN ?", []string{RunQueued, RunRunning, RunWaiting}).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("count active runs: %w", err)
	}
	return n, nil
}
