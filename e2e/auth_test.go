package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/gatewaytest"
	"github.com/agentryhq/agentry/internal/auth"
)

// TestJWTModeRoles runs a gateway in jwt mode: tokens signed with the
// configured secret authenticate with their role; the API key does not.
func TestJWTModeRoles(t *testing.T) {
	const secret = "jwt-secret-for-tests-0123456789abcdef"
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: agentsFor(), Config: `
auth:
  mode: jwt
  jwt: {secret: ` + secret + `, issuer: agentry-test}
`})
	issuer, err := auth.NewJWTAuthenticator(context.Background(), auth.JWTOptions{Secret: []byte(secret), Issuer: "agentry-test", AccessTTL: time.Minute, RefreshTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	token := func(role string, perms ...string) string {
		a, _, err := issuer.Issue("user-"+role, role, perms, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if r := g.Do("GET", "/api/v1/agents", nil); r.Status != 401 {
		t.Fatalf("api key in jwt mode: %d", r.Status)
	}
	if r := g.DoAs(token(auth.RoleViewer), "GET", "/api/v1/whoami", nil); r.Status != 200 || r.JSON["role"] != "viewer" || r.JSON["method"] != "jwt" {
		t.Fatalf("whoami: %d %s", r.Status, r.Raw)
	}
	checks := []struct {
		tok    string
		method string
		path   string
		body   any
		want   int
	}{
		{token(auth.RoleMember), "GET", "/api/v1/learning/feedback", nil, 403},
		{token(auth.RoleMember, auth.PermMemoryRead), "GET", "/api/v1/learning/feedback", nil, 200},
		{token(auth.RoleOperator), "GET", "/api/v1/learning/feedback", nil, 200},
		{token(auth.RoleMember), "POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "x", "overrides": map[string]any{"model": "gpt-4o"}}, 403},
		{token(auth.RoleOperator), "POST", "/api/v1/chat", map[string]any{"agent_id": "gpt", "text": "x", "overrides": map[string]any{"model": "gpt-4o"}}, 200},
		{token(auth.RoleOperator), "GET", "/api/v1/config", nil, 403},
		{token(auth.RoleAdmin), "GET", "/api/v1/config", nil, 200},
	}
	for _, c := range checks {
		if r := g.DoAs(c.tok, c.method, c.path, c.body); r.Status != c.want {
			t.Errorf("%s %s: %d, want %d: %s", c.method, c.path, r.Status, c.want, r.Raw)
		}
	}
}
