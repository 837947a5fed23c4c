package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/activities"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/events"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/taskruns"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// errNoTaskRuns answers run requests of a gateway without a Temporal client.
var errNoTaskRuns = fault.TemporalUnavailable("task runs are not available (no Temporal client)")

// WorkboardFeature serves the task board: tasks, runs, artifacts and
// comments (spec "Task board"; decisions in docs/workboard.md).
type WorkboardFeature struct {
	// Enabled is workboard.enabled; when false every route answers 503.
	Enabled bool
	Store   models.WorkboardStore
	Runs    *taskruns.Service
	Events  *events.Bus
	// ArtifactsDir is the workspace's artifact area; downloads never
	// leave it.
	ArtifactsDir string
	Logger       *slog.Logger
}

// Register implements Feature.
func (f *WorkboardFeature) Register(r fiber.Router) {
	g := r.Group("/workboard", f.requireEnabled)
	g.Get("/tasks", f.listTasks)
	g.Post("/tasks", f.createTask)
	g.Get("/tasks/:id", f.getTask)
	g.Patch("/tasks/:id", f.updateTask)
	g.Delete("/tasks/:id", f.deleteTask)
	g.Post("/tasks/:id/run", f.startRun)
	g.Get("/tasks/:id/runs", f.listRuns)
	g.Get("/tasks/:id/runs/:run_id", f.getRun)
	g.Post("/tasks/:id/runs/:run_id/cancel", f.cancelRun)
	g.Post("/tasks/:id/runs/:run_id/retry", f.retryRun)
	g.Get("/tasks/:id/artifacts", f.listArtifacts)
	g.Get("/artifacts/:id/download", f.downloadArtifact)
	g.Get("/tasks/:id/comments", f.listComments)
	g.Post("/tasks/:id/comments", f.createComment)
	g.Delete("/comments/:id", f.deleteComment)
}

func (f *WorkboardFeature) requireEnabled(c *fiber.Ctx) error {
	if !f.Enabled || f.Store == nil {
		return fault.NotEnabled("workboard not enabled")
	}
	return c.Next()
}

// notify wakes this process's event subscribers after a change (the store
// wrote the events in the change's transaction).
func (f *WorkboardFeature) notify() {
	if f.Events != nil {
		f.Events.Notify()
	}
}

// page reads limit and cursor. Cursors are opaque to clients: pass back
// the next_cursor of the previous page.
func page(c *fiber.Ctx) (models.Page, error) {
	limit, err := queryInt(c, "limit", models.DefaultPageLimit, 1, models.MaxPageLimit)
	if err != nil {
		return models.Page{}, err
	}
	p := models.Page{Limit: limit}
	if raw := c.Query("cursor"); raw != "" {
		n, ok := parseID(raw)
		if !ok {
			return models.Page{}, badRequest("cursor %q is not a cursor returned by this API (use next_cursor of the previous page)", raw)
		}
		p.Cursor = n
	}
	return p, nil
}

// withCursor adds next_cursor to a list answer when there is a next page.
func withCursor(m fiber.Map, next int64) fiber.Map {
	if next != 0 {
		m["next_cursor"] = strconv.FormatInt(next, 10)
	}
	return m
}

func (f *WorkboardFeature) listTasks(c *fiber.Ctx) error {
	p, err := page(c)
	if err != nil {
		return err
	}
	tasks, next, err := f.Store.ListTasks(c.UserContext(), models.TaskFilter{Status: c.Query("status"), AgentID: c.Query("agent_id"), Page: p})
	if err != nil {
		return err
	}
	return c.JSON(withCursor(fiber.Map{"tasks": tasks, "statuses": models.TaskStatuses()}, next))
}

func (f *WorkboardFeature) createTask(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	fields, err := decodeTaskFields(c)
	if err != nil {
		return err
	}
	task, err := f.Store.CreateTask(c.UserContext(), fields)
	if err != nil {
		return err
	}
	f.notify()
	c.Location(fmt.Sprintf("%s/workboard/tasks/%d", Prefix, task.ID))
	return c.Status(fiber.StatusCreated).JSON(task)
}

func (f *WorkboardFeature) getTask(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	task, err := f.Store.GetTask(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(task)
}

func (f *WorkboardFeature) updateTask(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	fields, err := decodeTaskFields(c)
	if err != nil {
		return err
	}
	if fields == (models.TaskFields{}) {
		return badRequest("the request changes nothing: send one or more of title, description, agent_id, status, owner, priority, tags, due_at, max_cost_usd")
	}
	task, err := f.Store.UpdateTask(c.UserContext(), id, fields)
	if err != nil {
		return err
	}
	f.notify()
	if fields.MaxCostUSD != nil && f.Runs != nil {
		// A changed cap: runs waiting for theirs check again now.
		if _, err := f.Runs.NudgeCostCapWaits(c.UserContext()); err != nil && f.Logger != nil {
			f.Logger.Warn("workboard: tell runs waiting for a cost cap", "task_id", id, "err", err)
		}
	}
	return c.JSON(task)
}

func (f *WorkboardFeature) deleteTask(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	if _, err := f.Store.DeleteTask(c.UserContext(), id); err != nil {
		return err
	}
	f.notify()
	// The records are gone; the files of the task's runs go too.
	if f.ArtifactsDir != "" {
		dir := filepath.Join(f.ArtifactsDir, strconv.FormatInt(id, 10))
		if err := os.RemoveAll(dir); err != nil && f.Logger != nil {
			f.Logger.Warn("workboard: remove artifacts of deleted task", "task_id", id, "err", err)
		}
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (f *WorkboardFeature) startRun(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	if f.Runs == nil {
		return errNoTaskRuns
	}
	run, err := f.Runs.Start(c.UserContext(), id, workflows.TriggerAPI)
	if err != nil {
		return err
	}
	c.Location(fmt.Sprintf("%s/workboard/tasks/%d/runs/%d", Prefix, id, run.ID))
	return c.Status(fiber.StatusAccepted).JSON(run)
}

func (f *WorkboardFeature) listRuns(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	p, err := page(c)
	if err != nil {
		return err
	}
	runs, total, next, err := f.Store.ListRuns(c.UserContext(), id, p)
	if err != nil {
		return err
	}
	if err := withTrees(c.UserContext(), f.Store, runs); err != nil {
		return err
	}
	return c.JSON(withCursor(fiber.Map{"runs": runs, "count": total}, next))
}

func (f *WorkboardFeature) getRun(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	runID, err := pathInt(c, "run_id")
	if err != nil {
		return err
	}
	run, err := f.Store.GetRun(c.UserContext(), id, runID)
	if err != nil {
		return err
	}
	run.StalledReason = f.Runs.StallReason(c.UserContext(), run)
	one := []models.TaskRun{*run}
	if err := withTrees(c.UserContext(), f.Store, one); err != nil {
		return err
	}
	return c.JSON(one[0])
}

func (f *WorkboardFeature) cancelRun(c *fiber.Ctx) error {
	_, run, err := f.runAction(c, func(ctx context.Context, taskID, runID int64) (*models.TaskRun, error) {
		return f.Runs.Cancel(ctx, taskID, runID)
	})
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(run)
}

// retryRun starts a new attempt of a failed run that goes on from its
// last recorded step (docs/retry.md).
func (f *WorkboardFeature) retryRun(c *fiber.Ctx) error {
	id, run, err := f.runAction(c, func(ctx context.Context, taskID, runID int64) (*models.TaskRun, error) {
		return f.Runs.Retry(ctx, taskID, runID)
	})
	if err != nil {
		return err
	}
	c.Location(fmt.Sprintf("%s/workboard/tasks/%d/runs/%d", Prefix, id, run.ID))
	return c.Status(fiber.StatusAccepted).JSON(run)
}

// runAction serves POST .../tasks/{id}/runs/{run_id}/<action>: it needs
// the write permission, both ids and a Temporal client, then calls act.
func (f *WorkboardFeature) runAction(c *fiber.Ctx, act func(ctx context.Context, taskID, runID int64) (*models.TaskRun, error)) (int64, *models.TaskRun, error) {
	if err := Require(c, auth.PermWrite); err != nil {
		return 0, nil, err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return 0, nil, err
	}
	runID, err := pathInt(c, "run_id")
	if err != nil {
		return 0, nil, err
	}
	if f.Runs == nil {
		return 0, nil, errNoTaskRuns
	}
	run, err := act(c.UserContext(), id, runID)
	return id, run, err
}

func (f *WorkboardFeature) listArtifacts(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	p, err := page(c)
	if err != nil {
		return err
	}
	arts, total, next, err := f.Store.ListArtifacts(c.UserContext(), id, p)
	if err != nil {
		return err
	}
	return c.JSON(withCursor(fiber.Map{"artifacts": arts, "count": total}, next))
}

// downloadArtifact streams an artifact's file. The recorded path is
// checked again (symlinks resolved) to lie inside the artifact area: a
// path outside it is answered like an unknown artifact.
func (f *WorkboardFeature) downloadArtifact(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	art, err := f.Store.GetArtifact(c.UserContext(), id)
	if err != nil {
		return err
	}
	outside := func() error {
		if f.Logger != nil {
			f.Logger.Warn("workboard: artifact path outside the artifact area refused", "artifact_id", id)
		}
		return &Error{Status: fiber.StatusNotFound, Message: fmt.Sprintf("artifact %d not found", id), Code: "not_found"}
	}
	gone := func() error {
		return &Error{Status: fiber.StatusGone, Message: fmt.Sprintf("artifact %d: its file no longer exists on disk", id), Code: "gone"}
	}
	area, err := filepath.EvalSymlinks(f.ArtifactsDir)
	if err != nil {
		return gone()
	}
	if !filepath.IsAbs(art.Path) || !activities.Inside(area, filepath.Clean(art.Path)) {
		return outside()
	}
	real, err := filepath.EvalSymlinks(art.Path)
	if errors.Is(err, os.ErrNotExist) {
		return gone()
	}
	if err != nil {
		return fmt.Errorf("artifact %d: %w", id, err)
	}
	if !activities.Inside(area, real) {
		return outside()
	}
	fh, err := os.Open(real)
	if errors.Is(err, os.ErrNotExist) {
		return gone()
	}
	if err != nil {
		return fmt.Errorf("artifact %d: %w", id, err)
	}
	st, err := fh.Stat()
	if err != nil || !st.Mode().IsRegular() {
		fh.Close()
		return gone()
	}
	ctype := mime.TypeByExtension(filepath.Ext(real))
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	c.Set(fiber.HeaderContentType, ctype)
	c.Set(fiber.HeaderContentDisposition, mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(real)}))
	c.Set("X-Content-Type-Options", "nosniff")
	return c.SendStream(fh, int(st.Size())) // fasthttp closes fh when sent
}

func (f *WorkboardFeature) listComments(c *fiber.Ctx) error {
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	p, err := page(c)
	if err != nil {
		return err
	}
	comments, total, next, err := f.Store.ListComments(c.UserContext(), id, p)
	if err != nil {
		return err
	}
	return c.JSON(withCursor(fiber.Map{"comments": comments, "count": total}, next))
}

// commentBody is the spec's comment request plus the review decision.
type commentBody struct {
	Author   string `json:"author"`
	Body     string `json:"body"`
	Kind     string `json:"kind"`
	Decision string `json:"decision"`
}

// commentAnswer is a created comment with the task status after it (a
// review decision moves the task).
type commentAnswer struct {
	models.Comment
	TaskStatus string `json:"task_status"`
}

func (f *WorkboardFeature) createComment(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	var b commentBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	if strings.TrimSpace(b.Author) == "" {
		if p := Principal(c); p != nil {
			b.Author = p.Subject
		}
	}
	comment, task, err := f.Store.CreateComment(c.UserContext(), id, models.NewComment{Author: b.Author, Body: b.Body, Kind: b.Kind, Decision: b.Decision})
	if err != nil {
		return err
	}
	f.notify()
	return c.Status(fiber.StatusCreated).JSON(commentAnswer{Comment: *comment, TaskStatus: task.Status})
}

func (f *WorkboardFeature) deleteComment(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	id, err := pathInt(c, "id")
	if err != nil {
		return err
	}
	if err := f.Store.DeleteComment(c.UserContext(), id); err != nil {
		return err
	}
	f.notify()
	return c.SendStatus(fiber.StatusNoContent)
}

// decodeTaskFields reads the task fields of a create or patch body, keeping
// apart "not sent" (nil) from "sent empty". Type errors name the field;
// value rules (title not blank, known status, ...) are the store's.
func decodeTaskFields(c *fiber.Ctx) (models.TaskFields, error) {
	var f models.TaskFields
	body := bytes.TrimSpace(c.Body())
	if len(body) == 0 || body[0] != '{' {
		return f, badRequest("request body must be a JSON object")
	}
	if err := refuseBadText(body); err != nil {
		return f, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return f, badRequest("request body is not valid JSON: %v", err)
	}
	fieldErr := func(name, msg string) error {
		return &Error{Status: fiber.StatusBadRequest, Message: name + ": " + msg, Code: "invalid", Fields: map[string]any{"field": name}}
	}
	// str reads a string field; JSON null means "" for clearable fields.
	str := func(name string, dst **string, clearable bool) error {
		v, ok := raw[name]
		if !ok {
			return nil
		}
		if string(bytes.TrimSpace(v)) == "null" {
			if !clearable {
				return fieldErr(name, "must be a string, not null")
			}
			empty := ""
			*dst = &empty
			return nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fieldErr(name, "must be a string")
		}
		*dst = &s
		return nil
	}
	for _, fd := range []struct {
		name      string
		dst       **string
		clearable bool
	}{
		{"title", &f.Title, false},
		{"description", &f.Description, true},
		{"agent_id", &f.AgentID, true},
		{"status", &f.Status, false},
		{"owner", &f.Owner, true},
		{"priority", &f.Priority, true},
		{"due_at", &f.DueAt, true},
	} {
		if err := str(fd.name, fd.dst, fd.clearable); err != nil {
			return f, err
		}
	}
	if v, ok := raw["tags"]; ok {
		tags := []string{}
		if string(bytes.TrimSpace(v)) != "null" {
			if err := json.Unmarshal(v, &tags); err != nil || tags == nil {
				return f, fieldErr("tags", "must be an array of strings")
			}
		}
		f.Tags = &tags
	}
	if v, ok := raw["max_cost_usd"]; ok {
		var usd float64
		if string(bytes.TrimSpace(v)) != "null" {
			if err := json.Unmarshal(v, &usd); err != nil {
				return f, fieldErr("max_cost_usd", "must be a number of US dollars (or null for no cap)")
			}
		}
		f.MaxCostUSD = &usd
	}
	return f, nil
}

// withTrees adds the runs' trees (peer runs and tree cost, docs/teams.md)
// when the store keeps them.
func withTrees(ctx context.Context, store models.WorkboardStore, runs []models.TaskRun) error {
	if ts, ok := store.(interface {
		WithTrees(context.Context, []models.TaskRun) error
	}); ok {
		return ts.WithTrees(ctx, runs)
	}
	return nil
}
