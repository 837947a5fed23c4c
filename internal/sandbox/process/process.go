// Package process is the default executor: a fresh sandboxed interpreter
// per call (sandbox.Jail: bubblewrap, rlimits, a cgroup per call).
package process

import (
	"context"

	"github.com/agentryhq/agentry/internal/sandbox"
)

// Executor runs each call in a fresh jail.
type Executor struct {
	Jail *sandbox.Jail
}

// New is the process executor over jail.
func New(jail *sandbox.Jail) *Executor { return &Executor{Jail: jail} }

// Name is "process".
func (e *Executor) Name() string { return "process" }

// Run executes req in a fresh jail.
func (e *Executor) Run(ctx context.Context, req sandbox.Request) (sandbox.Result, error) {
	return e.Jail.Run(ctx, req)
}

// Isolation is the jail's.
func (e *Executor) Isolation() sandbox.Isolation {
	iso := e.Jail.Isolation()
	iso.Backend = "process"
	return iso
}

// Close does nothing.
func (e *Executor) Close() error { return nil }
