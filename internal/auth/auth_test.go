package auth

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func TestKeyAuthenticator(t *testing.T) {
	a := NewKeyAuthenticator([]APIKey{{Key: "admin-key", Subject: "admin", Role: RoleAdmin}, {Key: "viewer-key", Subject: "vic", Role: RoleViewer}, {Key: ""}})
	ctx := context.Background()
	p, err := a.Authenticate(ctx, "viewer-key")
	if err != nil || p.Subject != "vic" || p.Role != RoleViewer || p.Can(PermWrite) {
		t.Fatalf("viewer: %+v %v", p, err)
	}
	p, err = a.Authenticate(ctx, "admin-key")
	if err != nil || !p.Can(PermMemoryRead) || !p.Can(PermOverrideModel) {
		t.Fatalf("admin: %+v %v", p, err)
	}
	for _, bad := range []string{"", "admin-ke", "admin-key ", "nope"} {
		if _, err := a.Authenticate(ctx, bad); err != ErrUnauthenticated {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "credentials", "api_key")
	k1, created, err := LoadOrCreateKey(path)
	if err != nil || !created || len(k1) < 32 {
		t.Fatalf("create: %q %v %v", k1, created, err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", st.Mode().Perm())
	}
	k2, created, err := LoadOrCreateKey(path)
	if err != nil || created || k2 != k1 {
		t.Fatalf("reload: %q %v %v", k2, created, err)
	}
}

func TestJWTRolesAndRefresh(t *testing.T) {
	ctx := context.Background()
	a, err := NewJWTAuthenticator(ctx, JWTOptions{Secret: []byte("s3cret-s3cret-s3cret-s3cret-s3cr"), AccessTTL: time.Minute, RefreshTTL: time.Hour, Issuer: "agentry"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	access, refresh, err := a.Issue("mia", RoleMember, []string{PermMemoryRead}, now)
	if err != nil {
		t.Fatal(err)
	}
	p, err := a.Authenticate(ctx, access)
	if err != nil || p.Subject != "mia" || p.Role != RoleMember || p.Method != "jwt" {
		t.Fatalf("access: %+v %v", p, err)
	}
	if !p.Can(PermMemoryRead) || p.Can(PermOverrideModel) {
		t.Fatalf("member with memory:read grant: %+v", p)
	}
	if _, err := a.Authenticate(ctx, refresh); err == nil {
		t.Fatal("a refresh token must not work as an access token")
	}
	a2, r2, err := a.Refresh(refresh, now.Add(time.Second))
	if err != nil || a2 == "" || r2 == "" {
		t.Fatalf("refresh: %v", err)
	}
	if _, _, err := a.Refresh(access, now); err == nil {
		t.Fatal("an access token must not refresh")
	}
	expired, _, _ := a.Issue("mia", RoleMember, nil, now.Add(-2*time.Hour))
	if _, err := a.Authenticate(ctx, expired); err == nil {
		t.Fatal("expired token accepted")
	}
	other, _ := NewJWTAuthenticator(ctx, JWTOptions{Secret: []byte("another-secret-another-secret-00"), AccessTTL: time.Minute, RefreshTTL: time.Hour})
	forged, _, _ := other.Issue("mallory", RoleAdmin, nil, now)
	if _, err := a.Authenticate(ctx, forged); err == nil {
		t.Fatal("token signed with another secret accepted")
	}
	noRole := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "x", "exp": now.Add(time.Minute).Unix(), "iss": "agentry"})
	s, _ := noRole.SignedString([]byte("s3cret-s3cret-s3cret-s3cret-s3cr"))
	if _, err := a.Authenticate(ctx, s); err == nil {
		t.Fatal("token without role accepted")
	}
	if _, _, err := a.Issue("x", "superuser", nil, now); err == nil {
		t.Fatal("unknown role issued")
	}
}

func TestJWTNeedsSecretOrIssuer(t *testing.T) {
	if _, err := NewJWTAuthenticator(context.Background(), JWTOptions{}); err == nil {
		t.Fatal("expected an error")
	}
}

// TestOIDCAgainstLocalJWKS serves a discovery document and a JWKS on
// loopback and checks RS256 tokens of that issuer, including key rotation.
func TestOIDCAgainstLocalJWKS(t *testing.T) {
	key1, _ := rsa.GenerateKey(rand.Reader, 2048)
	key2, _ := rsa.GenerateKey(rand.Reader, 2048)
	current := map[string]*rsa.PublicKey{"k1": &key1.PublicKey}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	issuer := srv.URL
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": issuer + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		var keys []map[string]string
		for kid, k := range current {
			keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
				"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())})
		}
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	})
	ctx := context.Background()
	a, err := NewJWTAuthenticator(ctx, JWTOptions{OIDCIssuer: issuer, OIDCAudience: "agentry"})
	if err != nil {
		t.Fatal(err)
	}
	sign := func(k *rsa.PrivateKey, kid string, claims jwt.MapClaims) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
		tok.Header["kid"] = kid
		s, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := jwt.MapClaims{"sub": "oscar", "role": "operator", "iss": issuer, "aud": "agentry", "exp": time.Now().Add(time.Minute).Unix()}
	p, err := a.Authenticate(ctx, sign(key1, "k1", good))
	if err != nil || p.Subject != "oscar" || p.Role != RoleOperator || p.Method != "oidc" {
		t.Fatalf("oidc token: %+v %v", p, err)
	}
	wrongIss := jwt.MapClaims{"sub": "oscar", "role": "operator", "iss": "https://evil.example", "aud": "agentry", "exp": time.Now().Add(time.Minute).Unix()}
	if _, err := a.Authenticate(ctx, sign(key1, "k1", wrongIss)); err == nil {
		t.Fatal("wrong issuer accepted")
	}
	wrongAud := jwt.MapClaims{"sub": "oscar", "role": "operator", "iss": issuer, "aud": "other", "exp": time.Now().Add(time.Minute).Unix()}
	if _, err := a.Authenticate(ctx, sign(key1, "k1", wrongAud)); err == nil {
		t.Fatal("wrong audience accepted")
	}
	if _, err := a.Authenticate(ctx, sign(key2, "k1", good)); err == nil {
		t.Fatal("token signed by an unpublished key accepted")
	}
	// Rotation: the issuer publishes k2; after the refetch interval a k2 token verifies.
	current = map[string]*rsa.PublicKey{"k2": &key2.PublicKey}
	a.jwks.mu.Lock()
	a.jwks.fetchedAt = time.Time{}
	a.jwks.mu.Unlock()
	if _, err := a.Authenticate(ctx, sign(key2, "k2", good)); err != nil {
		t.Fatalf("rotated key: %v", err)
	}
}
