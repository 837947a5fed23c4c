package client

import (
	"context"
	"encoding/json"
	"github.com/agentryhq/agentry/internal/agentpkg"
	"net/http"
	"net/url"
	"strconv"
)

// PackageExport is GET /agents/{id}/package: the unsigned package
// document and the bundle files the gateway left out.
type PackageExport struct {
	Raw
	Package json.RawMessage `json:"package"`
	Skipped []string        `json:"skipped"`
}

// ExportAgentPackage asks the gateway for an agent's package.
func (c *Client) ExportAgentPackage(ctx context.Context, id string) (*PackageExport, error) {
	var e PackageExport
	return &e, c.Do(ctx, http.MethodGet, "/agents/"+url.PathEscape(id)+"/package", nil, &e)
}

// PackageRequirements is the package checklist (the format's own type).
type PackageRequirements = agentpkg.Requirements

// PackageReport is POST /agent-packages/inspect.
type PackageReport struct {
	Raw
	AgentID      string              `json:"agent_id"`
	Checksum     string              `json:"checksum"`
	Signed       bool                `json:"signed"`
	KeyID        string              `json:"key_id"`
	Files        []string            `json:"files"`
	Requirements PackageRequirements `json:"requirements"`
	Missing      PackageRequirements `json:"missing"`
	Exists       bool                `json:"exists"`
}

// InspectAgentPackage has the gateway verify a package and list what it lacks.
func (c *Client) InspectAgentPackage(ctx context.Context, doc []byte) (*PackageReport, error) {
	var r PackageReport
	return &r, c.Do(ctx, http.MethodPost, "/agent-packages/inspect", doc, &r)
}

// PackageImport is POST /agent-packages/import.
type PackageImport struct {
	Raw
	Agent  Agent         `json:"agent"`
	Report PackageReport `json:"report"`
}

// ImportAgentPackage installs a package on the gateway.
func (c *Client) ImportAgentPackage(ctx context.Context, doc []byte, enable, overwrite bool) (*PackageImport, error) {
	var r PackageImport
	q := url.Values{"enable": {strconv.FormatBool(enable)}, "overwrite": {strconv.FormatBool(overwrite)}}
	return &r, c.Do(ctx, http.MethodPost, "/agent-packages/import?"+q.Encode(), doc, &r)
}
