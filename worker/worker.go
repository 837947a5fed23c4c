// Package worker registers Agentry's workflows and activities on the task
// queue. The gateway runs it in-process; `agentryd worker` runs it alone so
// that workers can be scaled out.
package worker

import (
	"fmt"
	"log/slog"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
)

// Registration adds workflows and activities to a worker.
type Registration func(r sdkworker.Registry)

// Worker is one Temporal worker on one task queue.
type Worker struct {
	c         client.Client
	taskQueue string
	log       *slog.Logger
	regs      []Registration
	w         sdkworker.Worker
}

// New prepares a worker; Add registrations before Start.
func New(c client.Client, taskQueue string, log *slog.Logger) *Worker {
	return &Worker{c: c, taskQueue: taskQueue, log: log}
}

// Add queues a registration.
func (w *Worker) Add(r Registration) { w.regs = append(w.regs, r) }

// Start registers everything and starts polling. Without registrations there
// is nothing to poll for and it does nothing.
func (w *Worker) Start() error {
	if len(w.regs) == 0 {
		return nil
	}
	w.w = sdkworker.New(w.c, w.taskQueue, sdkworker.Options{})
	for _, r := range w.regs {
		r(w.w)
	}
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
