package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// The answers: each is the generated type of the document plus the body
// it was decoded from (Raw), one per route the CLI calls. The calls below
// are one generated request each, finished by Client.read.

// Health is GET /health.
type Health struct {
	Raw
	openapi.Health
}

// Whoami is GET /whoami: the authenticated principal.
type Whoami struct {
	Raw
	openapi.Principal
}

// AgentList is GET /agents.
type AgentList struct {
	Raw
	openapi.AgentList
}

// Agent is the single form of an agent.
type Agent struct {
	Raw
	openapi.Agent
}

// TriggerRequest runs an agent now.
type TriggerRequest = openapi.TriggerRequest

// TriggerReply is the answer of POST /agents/{id}/trigger.
type TriggerReply struct {
	Raw
	openapi.TriggerReply
}

// ChatRequest is the spec's chat request.
type ChatRequest = openapi.ChatRequest

// ChatReply is the done frame of a chat stream (the ids of the run).
type ChatReply struct {
	Raw
	openapi.ChatResponse
}

// ChannelList is GET /channels.
type ChannelList struct {
	Raw
	openapi.ChannelList
}

// Channel is one channel adapter with its status.
type Channel struct {
	Raw
	openapi.Channel
}

// ChannelMessageList is GET /channels/{id}/messages.
type ChannelMessageList struct {
	Raw
	openapi.ChannelMessageList
}

// ScheduleList is GET /schedules.
type ScheduleList struct {
	Raw
	openapi.ScheduleList
}

// MemoryList is GET /memory.
type MemoryList struct {
	Raw
	openapi.MemoryList
}

// SecretList is GET /secrets.
type SecretList struct {
	Raw
	openapi.SecretList
}

// LogLines is GET /logs and GET /logs/audit.
type LogLines struct {
	Raw
	openapi.LogLines
}

// Diagnostics is GET /diagnostics.
type Diagnostics struct {
	Raw
	openapi.Diagnostics
}

// ConfigDocument is GET /config.
type ConfigDocument struct {
	Raw
	openapi.ConfigDocument
}

// ReconciliationRun is GET /costs/reconciliation/runs/{run_id}.
type ReconciliationRun struct {
	Raw
	openapi.ReconciliationRun
}

// ReconciliationStarted is the answer of POST /costs/reconciliation/run.
type ReconciliationStarted struct {
	Raw
	openapi.ReconciliationStarted
}

// ApprovalList is GET /approvals.
type ApprovalList struct {
	Raw
	openapi.ApprovalList
}

// Approval is a tool call a durable run waits on a person for.
type Approval struct {
	Raw
	openapi.Approval
}

// ApprovalFilter selects approvals (zero fields match everything).
type ApprovalFilter struct {
	Status  string
	TaskID  int64
	AgentID string
	// Schedule is a scheduled agent's id: the approvals of its firings.
	Schedule string
}

// MCPServerSpec is the body of PUT /mcp/own/{id}.
type MCPServerSpec = openapi.MCPServerSpec

// MCPServer is a server's status: header and env names only, never values.
type MCPServer struct {
	Raw
	openapi.MCPServer
}

// MCPServerList is GET /mcp/own.
type MCPServerList struct {
	Raw
	openapi.MCPServerList
}

// PackageInstallRequest is the body of POST /package-installs.
type PackageInstallRequest = openapi.PackageInstallRequest

// PackageInstallJob is a package install job and its progress.
type PackageInstallJob struct {
	Raw
	openapi.PackageInstallJob
}

// PackageExport is GET /agents/{id}/package: the unsigned package document
// (its exact bytes) and the bundle files the gateway left out.
type PackageExport struct {
	Raw
	openapi.AgentPackageExport
}

// PackageReport is POST /agent-packages/inspect.
type PackageReport struct {
	Raw
	openapi.PackageReport
}

// PackageImport is POST /agent-packages/import.
type PackageImport struct {
	Raw
	openapi.AgentPackageImport
}

// SkillList is GET /skills.
type SkillList struct {
	Raw
	openapi.SkillList
}

// Skill is GET /skills/{name}.
type Skill struct {
	Raw
	openapi.Skill
}

// SkillRescan is POST /skills/rescan.
type SkillRescan struct {
	Raw
	openapi.SkillRescan
}

// SkillInstallRequest is the body of POST /skills/install.
type SkillInstallRequest = openapi.SkillInstallRequest

// SkillPlan is POST /skills/install: the review, and after an install the
// rescan.
type SkillPlan struct {
	Raw
	openapi.SkillPlan
}

// TaskRun is a run of a workboard task.
type TaskRun struct {
	Raw
	openapi.Run
}

// Health reads GET /health. A degraded gateway answers 503 with the same
// body; that is returned as a Health, not an error.
func (c *Client) Health(ctx context.Context) (*Health, error) {
	var h Health
	resp, err := c.root.GetHealth(ctx)
	err = c.read(ctx, "GET /health", resp, err, &h)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusServiceUnavailable {
		h.setRaw(ae.Body)
		if json.Unmarshal(ae.Body, &h) == nil && h.Status != "" {
			return &h, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return &h, nil
}

// Whoami checks the credentials.
func (c *Client) Whoami(ctx context.Context) (*Whoami, error) {
	var w Whoami
	resp, err := c.api.GetWhoami(ctx)
	return &w, c.read(ctx, "GET /whoami", resp, err, &w)
}

// Agents lists the agents.
func (c *Client) Agents(ctx context.Context) (*AgentList, error) {
	var l AgentList
	resp, err := c.api.GetAgents(ctx)
	return &l, c.read(ctx, "GET /agents", resp, err, &l)
}

// Agent reads one agent.
func (c *Client) Agent(ctx context.Context, id string) (*Agent, error) {
	var a Agent
	resp, err := c.api.GetAgentsAgentID(ctx, id)
	return &a, c.read(ctx, "GET /agents/{id}", resp, err, &a)
}

// CreateAgent sends a definition (YAML text); file names it in errors.
func (c *Client) CreateAgent(ctx context.Context, definition, file string) (*Agent, error) {
	var a Agent
	resp, err := c.api.PostAgents(ctx, openapi.AgentCreateRequest{Definition: definition, File: file})
	return &a, c.read(ctx, "POST /agents", resp, err, &a)
}

// SetAgentEnabled enables or disables an agent.
func (c *Client) SetAgentEnabled(ctx context.Context, id string, on bool) (*Agent, error) {
	var a Agent
	call, what := c.api.PostAgentsAgentIDDisable, "POST /agents/{id}/disable"
	if on {
		call, what = c.api.PostAgentsAgentIDEnable, "POST /agents/{id}/enable"
	}
	resp, err := call(ctx, id)
	return &a, c.read(ctx, what, resp, err, &a)
}

// DeleteAgent removes an agent's definition file.
func (c *Client) DeleteAgent(ctx context.Context, id string) error {
	resp, err := c.api.DeleteAgentsAgentID(ctx, id)
	return c.read(ctx, "DELETE /agents/{id}", resp, err, nil)
}

// TriggerAgent runs an agent synchronously.
func (c *Client) TriggerAgent(ctx context.Context, id string, req TriggerRequest) (*TriggerReply, error) {
	var r TriggerReply
	resp, err := c.api.PostAgentsAgentIDTrigger(ctx, id, req)
	return &r, c.read(ctx, "POST /agents/{id}/trigger", resp, err, &r)
}

// Channels lists channel adapters.
func (c *Client) Channels(ctx context.Context) (*ChannelList, error) {
	var l ChannelList
	resp, err := c.api.GetChannels(ctx)
	return &l, c.read(ctx, "GET /channels", resp, err, &l)
}

// Channel reads one channel.
func (c *Client) Channel(ctx context.Context, id string) (*Channel, error) {
	var ch Channel
	resp, err := c.api.GetChannelsID(ctx, id)
	return &ch, c.read(ctx, "GET /channels/{id}", resp, err, &ch)
}

// SetChannelEnabled enables or disables a channel.
func (c *Client) SetChannelEnabled(ctx context.Context, id string, on bool) (*Channel, error) {
	var ch Channel
	call, what := c.api.PostChannelsIDDisable, "POST /channels/{id}/disable"
	if on {
		call, what = c.api.PostChannelsIDEnable, "POST /channels/{id}/enable"
	}
	resp, err := call(ctx, id)
	return &ch, c.read(ctx, what, resp, err, &ch)
}

// UpdateChannel changes channel settings.
func (c *Client) UpdateChannel(ctx context.Context, id string, settings map[string]any) (*Channel, error) {
	var ch Channel
	resp, err := c.api.PatchChannelsID(ctx, id, openapi.PatchChannelsIDJSONRequestBody{Settings: settings})
	return &ch, c.read(ctx, "PATCH /channels/{id}", resp, err, &ch)
}

// PairChannel starts pairing a QR-paired channel (WhatsApp); the QR code
// appears in Adapter.Detail["qr"] of the channel as GET /channels/{id}
// reads it.
func (c *Client) PairChannel(ctx context.Context, id string) (*Channel, error) {
	var ch Channel
	resp, err := c.api.PostChannelsIDPair(ctx, id)
	return &ch, c.read(ctx, "POST /channels/{id}/pair", resp, err, &ch)
}

// UnpairChannel logs a QR-paired channel's device out.
func (c *Client) UnpairChannel(ctx context.Context, id string) (*Channel, error) {
	var ch Channel
	resp, err := c.api.PostChannelsIDUnpair(ctx, id)
	return &ch, c.read(ctx, "POST /channels/{id}/unpair", resp, err, &ch)
}

// ChannelMessages lists a messaging channel's inbound messages, newest
// first (limit 0: the gateway's default).
func (c *Client) ChannelMessages(ctx context.Context, id string, limit int) (*ChannelMessageList, error) {
	var l ChannelMessageList
	var p openapi.GetChannelsIDMessagesParams
	if limit > 0 {
		n := int64(limit)
		p.Limit = &n
	}
	resp, err := c.api.GetChannelsIDMessages(ctx, id, &p)
	return &l, c.read(ctx, "GET /channels/{id}/messages", resp, err, &l)
}

// Schedules lists scheduled agents.
func (c *Client) Schedules(ctx context.Context) (*ScheduleList, error) {
	var l ScheduleList
	resp, err := c.api.GetSchedules(ctx)
	return &l, c.read(ctx, "GET /schedules", resp, err, &l)
}

// Memory lists the conversations of an agent ("" and 0: the gateway's
// defaults).
func (c *Client) Memory(ctx context.Context, agentID string, limit int) (*MemoryList, error) {
	var p openapi.GetMemoryParams
	if agentID != "" {
		p.AgentID = &agentID
	}
	if limit > 0 {
		n := int64(limit)
		p.Limit = &n
	}
	var l MemoryList
	resp, err := c.api.GetMemory(ctx, &p)
	return &l, c.read(ctx, "GET /memory", resp, err, &l)
}

// Secrets lists secret names.
func (c *Client) Secrets(ctx context.Context) (*SecretList, error) {
	var l SecretList
	resp, err := c.api.GetSecrets(ctx)
	return &l, c.read(ctx, "GET /secrets", resp, err, &l)
}

// SetSecret stores a secret value (write-only).
func (c *Client) SetSecret(ctx context.Context, name, value string) error {
	resp, err := c.api.PutSecretsName(ctx, name, openapi.PutSecretsNameJSONRequestBody{Value: value})
	return c.read(ctx, "PUT /secrets/{name}", resp, err, nil)
}

// DeleteSecret removes a secret.
func (c *Client) DeleteSecret(ctx context.Context, name string) error {
	resp, err := c.api.DeleteSecretsName(ctx, name)
	return c.read(ctx, "DELETE /secrets/{name}", resp, err, nil)
}

// Logs returns the newest log lines.
func (c *Client) Logs(ctx context.Context, lines int) (*LogLines, error) {
	n := int64(lines)
	var l LogLines
	resp, err := c.api.GetLogs(ctx, &openapi.GetLogsParams{Lines: &n})
	return &l, c.read(ctx, "GET /logs", resp, err, &l)
}

// AuditLog returns the last `lines` lines of the audit log (JSON objects).
func (c *Client) AuditLog(ctx context.Context, lines int) (*LogLines, error) {
	n := int64(lines)
	var l LogLines
	resp, err := c.api.GetLogsAudit(ctx, &openapi.GetLogsAuditParams{Lines: &n})
	return &l, c.read(ctx, "GET /logs/audit", resp, err, &l)
}

// Diagnostics runs the gateway's own checks.
func (c *Client) Diagnostics(ctx context.Context) (*Diagnostics, error) {
	var d Diagnostics
	resp, err := c.api.GetDiagnostics(ctx)
	return &d, c.read(ctx, "GET /diagnostics", resp, err, &d)
}

// Config reads the gateway's (redacted) configuration.
func (c *Client) Config(ctx context.Context) (*ConfigDocument, error) {
	var d ConfigDocument
	resp, err := c.api.GetConfig(ctx)
	return &d, c.read(ctx, "GET /config", resp, err, &d)
}

// StartReconciliation starts (or joins) the reconciliation of day ("" is
// the previous completed UTC day). The day goes as typed: the gateway
// judges it.
func (c *Client) StartReconciliation(ctx context.Context, day string) (*ReconciliationStarted, error) {
	body := map[string]string{}
	if day != "" {
		body["day"] = day
	}
	data, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var out ReconciliationStarted
	resp, err := c.api.PostCostsReconciliationRunWithBody(ctx, "application/json", bytes.NewReader(data))
	return &out, c.read(ctx, "POST /costs/reconciliation/run", resp, err, &out)
}

// ReconciliationRun reads a run.
func (c *Client) ReconciliationRun(ctx context.Context, runID string) (*ReconciliationRun, error) {
	var out ReconciliationRun
	resp, err := c.api.GetCostsReconciliationRunsRunID(ctx, runID)
	return &out, c.read(ctx, "GET /costs/reconciliation/runs/{run_id}", resp, err, &out)
}

// Approvals lists the approvals f selects.
func (c *Client) Approvals(ctx context.Context, f ApprovalFilter) (*ApprovalList, error) {
	var p openapi.GetApprovalsParams
	if f.Status != "" {
		s := openapi.GetApprovalsParamsStatus(f.Status)
		p.Status = &s
	}
	if f.TaskID > 0 {
		p.TaskID = &f.TaskID
	}
	if f.AgentID != "" {
		p.AgentID = &f.AgentID
	}
	if f.Schedule != "" {
		p.Schedule = &f.Schedule
	}
	var l ApprovalList
	resp, err := c.api.GetApprovals(ctx, &p)
	return &l, c.read(ctx, "GET /approvals", resp, err, &l)
}

// DecideApproval approves or rejects an approval.
func (c *Client) DecideApproval(ctx context.Context, id int64, decision, comment string) (*Approval, error) {
	var a Approval
	resp, err := c.api.PostApprovalsID(ctx, id, openapi.PostApprovalsIDJSONRequestBody{
		Decision: openapi.PostApprovalsIDJSONBodyDecision(decision), Comment: comment})
	return &a, c.read(ctx, "POST /approvals/{id}", resp, err, &a)
}

// PutMCPServer registers or updates a server; the gateway contacts it and
// lists its tools before answering.
func (c *Client) PutMCPServer(ctx context.Context, id string, spec MCPServerSpec) (*MCPServer, error) {
	var s MCPServer
	resp, err := c.api.PutMCPOwnID(ctx, id, spec)
	return &s, c.read(ctx, "PUT /mcp/own/{id}", resp, err, &s)
}

// MCPServers lists every server.
func (c *Client) MCPServers(ctx context.Context) (*MCPServerList, error) {
	var l MCPServerList
	resp, err := c.api.GetMCPOwn(ctx)
	return &l, c.read(ctx, "GET /mcp/own", resp, err, &l)
}

// DeleteMCPServer removes a server registered through the API.
func (c *Client) DeleteMCPServer(ctx context.Context, id string) error {
	resp, err := c.api.DeleteMCPOwnID(ctx, id)
	return c.read(ctx, "DELETE /mcp/own/{id}", resp, err, nil)
}

// StartPackageInstall creates a package install job on the gateway.
func (c *Client) StartPackageInstall(ctx context.Context, req PackageInstallRequest) (*PackageInstallJob, error) {
	var j PackageInstallJob
	resp, err := c.api.PostPackageInstalls(ctx, req)
	return &j, c.read(ctx, "POST /package-installs", resp, err, &j)
}

// PackageInstall reads a job and its progress.
func (c *Client) PackageInstall(ctx context.Context, id string) (*PackageInstallJob, error) {
	var j PackageInstallJob
	resp, err := c.api.GetPackageInstallsJobID(ctx, id)
	return &j, c.read(ctx, "GET /package-installs/{id}", resp, err, &j)
}

// ExportAgentPackage asks the gateway for an agent's package.
func (c *Client) ExportAgentPackage(ctx context.Context, id string) (*PackageExport, error) {
	var e PackageExport
	resp, err := c.api.GetAgentsAgentIDPackage(ctx, id)
	return &e, c.read(ctx, "GET /agents/{id}/package", resp, err, &e)
}

// InspectAgentPackage has the gateway verify a package and list what it lacks.
func (c *Client) InspectAgentPackage(ctx context.Context, doc []byte) (*PackageReport, error) {
	var r PackageReport
	resp, err := c.api.PostAgentPackagesInspectWithBody(ctx, "application/json", bytes.NewReader(doc))
	return &r, c.read(ctx, "POST /agent-packages/inspect", resp, err, &r)
}

// ImportAgentPackage installs a package on the gateway.
func (c *Client) ImportAgentPackage(ctx context.Context, doc []byte, enable, overwrite bool) (*PackageImport, error) {
	var r PackageImport
	resp, err := c.api.PostAgentPackagesImportWithBody(ctx, &openapi.PostAgentPackagesImportParams{Enable: &enable, Overwrite: &overwrite},
		"application/json", bytes.NewReader(doc))
	return &r, c.read(ctx, "POST /agent-packages/import", resp, err, &r)
}

// Skills lists the loaded skills.
func (c *Client) Skills(ctx context.Context) (*SkillList, error) {
	var l SkillList
	resp, err := c.api.GetSkills(ctx)
	return &l, c.read(ctx, "GET /skills", resp, err, &l)
}

// Skill is one skill.
func (c *Client) Skill(ctx context.Context, name string) (*Skill, error) {
	var s Skill
	resp, err := c.api.GetSkillsName(ctx, name)
	return &s, c.read(ctx, "GET /skills/{name}", resp, err, &s)
}

// RescanSkills hot-loads the skill folders.
func (c *Client) RescanSkills(ctx context.Context) (*SkillRescan, error) {
	var r SkillRescan
	resp, err := c.api.PostSkillsRescan(ctx)
	return &r, c.read(ctx, "POST /skills/rescan", resp, err, &r)
}

// InstallSkill reviews (no digest) or installs (the reviewed digest) a skill.
func (c *Client) InstallSkill(ctx context.Context, req SkillInstallRequest) (*SkillPlan, error) {
	var p SkillPlan
	resp, err := c.api.PostSkillsInstall(ctx, req)
	return &p, c.read(ctx, "POST /skills/install", resp, err, &p)
}

// RetryRun starts a new attempt of a failed run that goes on from its last
// recorded step (POST /workboard/tasks/{id}/runs/{run_id}/retry).
func (c *Client) RetryRun(ctx context.Context, taskID, runID int64) (*TaskRun, error) {
	var r TaskRun
	resp, err := c.api.PostWorkboardTasksIDRunsRunIDRetry(ctx, taskID, runID)
	return &r, c.read(ctx, "POST /workboard/tasks/{id}/runs/{run_id}/retry", resp, err, &r)
}
