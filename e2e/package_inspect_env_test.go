package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
)

// Issue 43: package inspect counts the MCP servers registered through the
// API, and only channel adapters that exist.
func TestPackageInspectSeesAPIRegisteredMCPServersAndRealChannels(t *testing.T) {
	g := startMCPGateway(t, "")
	web := map[string]any{"transport": "http", "url": startMCPHTTP(t, "Bearer insp-1"), "headers": map[string]string{"Authorization": "Bearer insp-1"}}
	if r := g.Do("PUT", "/api/v1/mcp/own/web", web); r.Status != 201 {
		t.Fatalf("PUT /mcp/own/web: %d %s", r.Status, r.Raw)
	}
	// An agent wanting the API-registered server, one that does not
	// exist, the webhook channel and a messaging adapter this gateway has
	// not got.
	if r := g.Do("POST", "/api/v1/agents", map[string]any{"definition": "id: needs\nsystem_prompt: x\nmcp: [web, ghost]\nchannels: [webhook, telegram]\n"}); r.Status != 201 {
		t.Fatalf("create agent: %d %s", r.Status, r.Raw)
	}
	exp := g.Do("GET", "/api/v1/agents/needs/package", nil)
	if exp.Status != 200 {
		t.Fatalf("export: %d %s", exp.Status, exp.Raw)
	}
	var body struct {
		Package json.RawMessage `json:"package"`
	}
	if err := json.Unmarshal(exp.Raw, &body); err != nil {
		t.Fatal(err)
	}
	r := g.Do("POST", "/api/v1/agent-packages/inspect", string(body.Package))
	if r.Status != 200 {
		t.Fatalf("inspect: %d %s", r.Status, r.Raw)
	}
	missing, _ := r.JSON["missing"].(map[string]any)
	names := func(key string) []string {
		var out []string
		for _, v := range missing[key].([]any) {
			out = append(out, fmt.Sprint(v))
		}
		return out
	}
	if got := names("mcp_servers"); !slices.Equal(got, []string{"ghost"}) {
		t.Errorf("missing MCP servers %v, want [ghost] (web is registered through the API)", got)
	}
	if got := names("channels"); !slices.Equal(got, []string{"telegram"}) {
		t.Errorf("missing channels %v, want [telegram]", got)
	}
}
