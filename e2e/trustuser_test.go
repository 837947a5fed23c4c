package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// One application key serving many end users: with trust_user_id the
// request's user_id is the subject of per-user rate limits and chargeback
// (scoped by the key's subject); without it every end user shares the
// key's limits (issue 43).
func TestTrustUserIDGivesEachEndUserTheirOwnLimits(t *testing.T) {
	const trusted, plain = "app-trusted-key-0123456789", "app-plain-key-0123456789"
	g := gatewaytest.Start(t, gatewaytest.Options{Agents: agentsFor(), Config: fmt.Sprintf(`
auth:
  keys:
    - {subject: shop, key: %s, role: member, trust_user_id: true}
    - {subject: blog, key: %s, role: member}
rate_limit: {enabled: true, per_user_rpm: 1}
`, trusted, plain)})
	chat := func(key, user string) int {
		r := g.DoAs(key, "POST", "/api/v1/chat", map[string]any{"agent_id": "helper", "text": "hi " + user, "user_id": user})
		return r.Status
	}
	// Trusted key: alice's limit is hers; bob still gets his one request.
	if s := chat(trusted, "alice"); s != 200 {
		t.Fatalf("alice first: %d", s)
	}
	if s := chat(trusted, "alice"); s != 429 {
		t.Fatalf("alice second: %d, want 429", s)
	}
	if s := chat(trusted, "bob"); s != 200 {
		t.Fatalf("bob under a trusted key shares alice's limit: %d", s)
	}
	// Untrusted key: carol and dave are the key's one subject.
	if s := chat(plain, "carol"); s != 200 {
		t.Fatalf("carol first: %d", s)
	}
	if s := chat(plain, "dave"); s != 429 {
		t.Fatalf("dave under an untrusted key got %d, want the shared 429", s)
	}
	r := g.Do("GET", "/api/v1/costs/chargeback?group_by=user", nil)
	if r.Status != 200 {
		t.Fatalf("chargeback: %d %s", r.Status, r.Raw)
	}
	var users []string
	for _, gr := range r.JSON["groups"].([]any) {
		users = append(users, fmt.Sprint(gr.(map[string]any)["user"]))
	}
	for _, want := range []string{"shop:alice", "shop:bob", "blog"} {
		if !slices.Contains(users, want) {
			t.Fatalf("chargeback users = %v, want %s among them", users, want)
		}
	}
	if slices.Contains(users, "blog:carol") || slices.Contains(users, "alice") {
		t.Fatalf("chargeback users = %v: an untrusted key's user_id or a bare user_id became a subject", users)
	}
}
