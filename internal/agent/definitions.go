// Package agent holds the agent loop that every surface (chat, webhooks,
// task runs, schedules) drives through an Executor, and its tools. Agent
// definitions, their registry and their files live in internal/agentdef
// (a leaf the CLI can link); the names below keep them reachable as
// agent.Definition, agent.Parse ... for the gateway's code.
package agent

import "github.com/agentryhq/agentry/internal/agentdef"

// Definitions (internal/agentdef).
type (
	Definition      = agentdef.Definition
	LLMSettings     = agentdef.LLMSettings
	WebhookMapping  = agentdef.WebhookMapping
	Schedule        = agentdef.Schedule
	ScheduleOutput  = agentdef.ScheduleOutput
	Approvals       = agentdef.Approvals
	FieldError      = agentdef.FieldError
	ValidationError = agentdef.ValidationError
	OutsideDirError = agentdef.OutsideDirError
	Files           = agentdef.Files
	Registry        = agentdef.Registry
)

// Triggers of an agent besides manual use (chat, task runs).
const (
	TriggerWebhook = agentdef.TriggerWebhook
	TriggerCron    = agentdef.TriggerCron
)

// DefaultApprovalTimeout is how long a durable run waits for a decision.
const DefaultApprovalTimeout = agentdef.DefaultApprovalTimeout

// Errors of definition-file management.
var (
	ErrExists   = agentdef.ErrExists
	ErrNotFound = agentdef.ErrNotFound
)

// KnownBuiltins are the builtin tools.
var KnownBuiltins = agentdef.KnownBuiltins

// Functions of internal/agentdef.
var (
	Parse              = agentdef.Parse
	ParseCron          = agentdef.ParseCron
	ApprovalNeeded     = agentdef.ApprovalNeeded
	NewFiles           = agentdef.NewFiles
	NewRegistry        = agentdef.NewRegistry
	DefinitionFromJSON = agentdef.DefinitionFromJSON
	BundleDir          = agentdef.BundleDir
	WithEnabled        = agentdef.WithEnabled
)
