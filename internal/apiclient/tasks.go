package apiclient

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// Task is a workboard task.
type Task struct {
	Raw
	openapi.Task
}

// CreateTask creates a task from the fields given (POST /workboard/tasks):
// names and values as the API takes them (title, agent_id, max_cost_usd, ...).
func (c *Client) CreateTask(ctx context.Context, fields map[string]any) (*Task, error) {
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var t Task
	resp, err := c.api.PostWorkboardTasksWithBody(ctx, "application/json", bytes.NewReader(body))
	return &t, c.read(ctx, "POST /workboard/tasks", resp, err, &t)
}

// UpdateTask changes the fields given of a task (PATCH /workboard/tasks/{id}).
func (c *Client) UpdateTask(ctx context.Context, id int64, fields map[string]any) (*Task, error) {
	body, err := json.Marshal(fields)
	if err != nil {
		return nil, err
	}
	var t Task
	resp, err := c.api.PatchWorkboardTasksIDWithBody(ctx, id, "application/json", bytes.NewReader(body))
	return &t, c.read(ctx, "PATCH /workboard/tasks/{id}", resp, err, &t)
}

// Chargeback is GET /costs/chargeback.
type Chargeback struct {
	Raw
	openapi.Chargeback
}

// Chargeback returns grouped cost totals; empty arguments take the
// gateway's defaults.
func (c *Client) Chargeback(ctx context.Context, groupBy, from, to string) (*Chargeback, error) {
	p := &openapi.GetCostsChargebackParams{}
	if groupBy != "" {
		p.GroupBy = &groupBy
	}
	if from != "" {
		p.From = &from
	}
	if to != "" {
		p.To = &to
	}
	var out Chargeback
	resp, err := c.api.GetCostsChargeback(ctx, p)
	return &out, c.read(ctx, "GET /costs/chargeback", resp, err, &out)
}
