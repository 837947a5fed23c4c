// Package workflows holds Agentry's Temporal workflows and, beside each,
// its contract: the registered name, the workflow-id builder, the
// JSON-tagged input and result structs, query names, the activities it
// calls (by name, with their input structs and error types) and the
// search attributes it carries. Everything that talks to a workflow -
// the services that start it (internal/...), the activities it calls
// (activities/), the worker that registers it (worker/) - imports this
// package; this package imports none of them. docs/workflows.md maps
// each workflow to its files.
//
// Workflow code is deterministic: no database, network, clock,
// randomness, goroutines or map iteration (workflowcheck runs in make
// test). Changes follow the versioning policy in docs/decisions.md.
package workflows

import "time"

// DefaultTaskQueue is the default of temporal.task_queue, the queue the
// gateway's worker polls.
const DefaultTaskQueue = "agentry"

// LocalTurnsWorkflowTaskTimeout is the workflow task timeout of a run
// whose LLM turns are local activities (TaskRunInput.LocalLLMTurns,
// WebhookPrepared.LocalLLMTurns). A local activity runs inside a workflow
// task, which the SDK renews at 80 % of this timeout; only then does the
// workflow see a cancel request or its deadline timer. Half of Temporal's
// default 10 s: a cancel lands within about 5 s, the run's bound is kept
// within about 9 s, and a crashed gateway's run is taken over after 5 s.
// Shorter would add a renewal (three history events) every few seconds
// of a long turn.
const LocalTurnsWorkflowTaskTimeout = 5 * time.Second

// Contract versions. A starter writes the current version into the
// Version field of a workflow input; 0 means an input written before the
// field existed and reads like version 1. Raise a version when the
// meaning of a field changes (adding an optional field does not need it).
const (
	TaskRunInputVersion        = 2
	ScheduledAgentInputVersion = 2
	DeliveryInputVersion       = 1
	WebhookRunInputVersion     = 1
	ReconcileInputVersion      = 1
)
