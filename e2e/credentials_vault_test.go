package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/vault/api"

	"github.com/agentryhq/agentry/dev/fakevault"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// TestVaultCredentialsAcrossARestart: a gateway with credentials.provider
// hashivault (the real Vault client against dev/fakevault on loopback)
// stores a secret through the API, is restarted on the same workspace and
// reads it back; the operator rotates the transit key and POST
// /secrets/rotate re-wraps; with Vault down a write is a clear 503 and the
// cached key still reads.
func TestVaultCredentialsAcrossARestart(t *testing.T) {
	v, err := fakevault.Listen("127.0.0.1:0", "e2e-vault-token")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { v.Close() })
	t.Setenv("VAULT_TOKEN", v.Token())
	cfg := fmt.Sprintf("credentials: {provider: hashivault, key_url: \"hashivault://agentry\", vault_address: %q, timeout: 2s, cache_ttl: 1h}\n", v.URL())
	ws := t.TempDir()
	const value = "zq9VAULT0sealed0value"

	g1 := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: cfg})
	if r := g1.Do("PUT", "/api/v1/secrets/VAULTED", map[string]any{"value": value}); r.Status != http.StatusNoContent {
		t.Fatalf("set: %d %s", r.Status, r.Raw)
	}
	if v.Calls("encrypt") != 1 {
		t.Fatalf("the data key was wrapped %d times by Vault, want 1", v.Calls("encrypt"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	g1.Shutdown(ctx)
	cancel()

	decrypts := v.Calls("decrypt")
	g2 := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: cfg})
	got, err := g2.Services().Secrets.Reveal(context.Background(), "VAULTED")
	if err != nil || got != value {
		t.Fatalf("restarted gateway reads %q, %v", got, err)
	}
	if v.Calls("decrypt") <= decrypts {
		t.Fatal("the restarted gateway did not ask Vault to unwrap the data key")
	}

	// Rotation: the operator rotates the key in Vault, then the gateway
	// re-wraps; version 1 retired, the value still reads after a restart.
	vc, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.Token())
	if _, err := vc.Logical().Write("transit/keys/agentry/rotate", nil); err != nil {
		t.Fatal(err)
	}
	r := g2.Do("POST", "/api/v1/secrets/rotate", nil)
	var rot struct {
		Provider  string `json:"provider"`
		Rewrapped int    `json:"rewrapped"`
	}
	if r.Status != http.StatusOK || json.Unmarshal(r.Raw, &rot) != nil || rot.Rewrapped != 1 || rot.Provider != "hashivault" {
		t.Fatalf("rotate: %d %s", r.Status, r.Raw)
	}
	if _, err := vc.Logical().Write("transit/keys/agentry/config", map[string]any{"min_decryption_version": 2}); err != nil {
		t.Fatal(err)
	}

	// Vault unreachable: the cached data key still reads, a write is 503.
	v.SetDown(true)
	if got, err := g2.Services().Secrets.Reveal(context.Background(), "VAULTED"); err != nil || got != value {
		t.Fatalf("cached read with Vault down: %q, %v", got, err)
	}
	r = g2.Do("PUT", "/api/v1/secrets/OTHER", map[string]any{"value": "x-value"})
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Raw), `"credentials_unavailable"`) ||
		!strings.Contains(string(r.Raw), "credentials provider hashivault") {
		t.Fatalf("write with Vault down: %d %s", r.Status, r.Raw)
	}
	if l := g2.Do("GET", "/api/v1/secrets", nil); strings.Contains(string(l.Raw), "OTHER") {
		t.Fatalf("a failed write is listed: %s", l.Raw)
	}
	v.SetDown(false)
	ctx, cancel = context.WithTimeout(context.Background(), 15*time.Second)
	g2.Shutdown(ctx)
	cancel()
	g3 := gatewaytest.Start(t, gatewaytest.Options{Workspace: ws, Config: cfg})
	if got, err := g3.Services().Secrets.Reveal(context.Background(), "VAULTED"); err != nil || got != value {
		t.Fatalf("after rotation and retiring key version 1: %q, %v", got, err)
	}
}
