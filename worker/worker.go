// Package worker registers Agentry's workflows and activities on the task
// queue and owns the worker's options. The gateway runs it in-process;
// `agentryd worker` runs it alone so that workers can be scaled out. Both
// hand it the same dependencies (Deps), from which it builds every
// activity struct itself (Activities, deps.go).
//
// To add a workflow: write it and its contract in workflows/, add one line
// to Workflows (workflows.go here), and build its activity struct in
// Activities from Deps (add a field to Deps when it needs a service the
// worker is not given yet). Replay tests (workflows/replay) register
// through RegisterWorkflows too, so a new workflow is covered once a
// history of it is recorded; the worker's and the gateway's tests fail
// while a contract names an activity nothing registers.
package worker

import (
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/interceptor"
	sdkworker "go.temporal.io/sdk/worker"
)

// Registration adds workflows or activities to a worker (for anything
// AddActivities does not cover, such as activities under explicit names).
type Registration func(r sdkworker.Registry)

// Worker is one Temporal worker on one task queue.
type Worker struct {
	c            client.Client
	taskQueue    string
	log          *slog.Logger
	activities   []any
	regs         []Registration
	interceptors []interceptor.WorkerInterceptor
	w            sdkworker.Worker
}

// New prepares a worker; add activities, registrations and interceptors
// before Start.
func New(c client.Client, taskQueue string, log *slog.Logger) *Worker {
	return &Worker{c: c, taskQueue: taskQueue, log: log}
}

// AddActivities queues activity structs (pointers): each exported method
// becomes an activity named after the method, the names the workflows'
// contracts call (workflows.Activity...).
func (w *Worker) AddActivities(structs ...any) { w.activities = append(w.activities, structs...) }

// Add queues a registration.
func (w *Worker) Add(r Registration) { w.regs = append(w.regs, r) }

// AddInterceptor adds a worker interceptor (tracing, metrics, logging
// context), applied in the order added.
func (w *Worker) AddInterceptor(i interceptor.WorkerInterceptor) {
	w.interceptors = append(w.interceptors, i)
}

// Options are the worker's options.
func (w *Worker) Options() sdkworker.Options {
	return sdkworker.Options{Interceptors: w.interceptors}
}

// Register registers every workflow, the queued activities and the
// registrations on r: what Start registers on the Temporal worker (tests
// pass a test environment or a Recorder).
func (w *Worker) Register(r sdkworker.Registry) {
	RegisterWorkflows(r)
	for _, a := range w.activities {
		r.RegisterActivity(a)
	}
	for _, reg := range w.regs {
		reg(r)
	}
}

// Start registers everything (Register) and starts polling.
func (w *Worker) Start() error {
	w.w = sdkworker.New(w.c, w.taskQueue, w.Options())
	w.Register(w.w)
	if err := w.w.Start(); err != nil {
		return fmt.Errorf("start Temporal worker on task queue %s: %w", w.taskQueue, err)
	}
	w.log.Info("temporal worker started", "task_queue", w.taskQueue)
	return nil
}

// Stop stops polling and waits for running activities to hand back.
func (w *Worker) Stop() {
	if w.w != nil {
		w.w.Stop()
		w.w = nil
	}
}
