// Package auth turns the Authorization header of an /api/v1 request into a
// Principal: who is calling and with which role. Two modes, chosen by
// auth.mode: apikey (server.api_key plus auth.keys) and jwt (HS256 tokens we
// issue, and optionally RS256 tokens of an OIDC issuer).
package auth

import (
	"context"
	"errors"
	"slices"
)

// Roles, most privileged first.
const (
	RoleAdmin    = "admin"
	RoleOperator = "operator"
	RoleMember   = "member"
	RoleViewer   = "viewer"
)

// Permissions checked by routes.
const (
	// PermMemoryRead reads memories and learning feedback.
	PermMemoryRead = "memory:read"
	// PermOverrideModel chooses a provider or model override in chat.
	PermOverrideModel = "llm:override"
	// PermWrite changes state (tasks, agents, channels, config).
	PermWrite = "write"
	// PermAdmin changes configuration and secrets.
	PermAdmin = "admin"
)

// rolePermissions is what each role may do. A JWT may add permissions of
// its own through the "permissions" claim (for example memory:read for a
// member); it can never remove the role's.
var rolePermissions = map[string][]string{
	RoleAdmin:    {PermMemoryRead, PermOverrideModel, PermWrite, PermAdmin},
	RoleOperator: {PermMemoryRead, PermOverrideModel, PermWrite},
	RoleMember:   {PermWrite},
	RoleViewer:   {},
}

// ValidRole reports whether r is a known role.
func ValidRole(r string) bool { _, ok := rolePermissions[r]; return ok }

// Principal is the authenticated caller.
type Principal struct {
	Subject     string   `json:"subject"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions,omitempty"`
	// Method is apikey, jwt or oidc.
	Method string `json:"method"`
	// TrustUserID: the caller's user_id names the end user for per-user
	// limits and chargeback (auth.keys[].trust_user_id).
	TrustUserID bool `json:"trust_user_id,omitempty"`
	// Agents, when not nil, are the only agents the caller may run
	// (auth.keys[].agents): chat with another is refused (403) and the
	// OpenAI-compatible model list and the MCP tool list leave it out.
	Agents []string `json:"agents,omitempty"`
}

// MayUseAgent reports whether the principal may run the agent.
func (p *Principal) MayUseAgent(id string) bool {
	return p == nil || p.Agents == nil || slices.Contains(p.Agents, id)
}

// CostSubject is the subject per-user budgets, quotas and chargeback key on:
// the principal's, or <subject>:<userID> for a key trusted to name its end
// users. The key's subject stays in front so one application's users never
// share a budget with another's, nor with a configured key's subject.
func (p *Principal) CostSubject(userID string) string {
	if p == nil {
		return "anonymous"
	}
	if p.TrustUserID && userID != "" {
		return p.Subject + ":" + userID
	}
	return p.Subject
}

// Can reports whether the principal holds a permission, by role or grant.
func (p *Principal) Can(perm string) bool {
	if p == nil {
		return false
	}
	return slices.Contains(rolePermissions[p.Role], perm) || slices.Contains(p.Permissions, perm)
}

// ErrUnauthenticated means the credentials are missing, malformed, expired or wrong.
var ErrUnauthenticated = errors.New("missing or invalid credentials")

// Authenticator checks a bearer credential.
type Authenticator interface {
	Authenticate(ctx context.Context, bearer string) (*Principal, error)
}

type principalKey struct{}

// WithPrincipal stores the caller in a context.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the caller stored by WithPrincipal, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}
