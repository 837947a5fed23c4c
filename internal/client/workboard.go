package client

import (
	"context"
	"fmt"
	"net/http"
)

// TaskRun is a run of a workboard task (the fields the CLI shows).
type TaskRun struct {
	Raw
	ID          int64  `json:"id"`
	TaskID      int64  `json:"task_id"`
	Attempt     int    `json:"attempt"`
	Status      string `json:"status"`
	Trigger     string `json:"trigger"`
	RetryOf     int64  `json:"retry_of"`
	ReusedTurns int    `json:"reused_turns"`
}

// RetryRun starts a new attempt of a failed run that goes on from its last
// recorded step (POST /workboard/tasks/{id}/runs/{run_id}/retry).
func (c *Client) RetryRun(ctx context.Context, taskID, runID int64) (*TaskRun, error) {
	var r TaskRun
	return &r, c.Do(ctx, http.MethodPost, fmt.Sprintf("/workboard/tasks/%d/runs/%d/retry", taskID, runID), nil, &r)
}
