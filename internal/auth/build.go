package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/agentryhq/agentry/internal/config"
)

// FromConfig builds the authenticator auth.mode asks for. apiKey is the
// effective admin key (server.api_key, or the generated one).
func FromConfig(ctx context.Context, cfg *config.Config, apiKey string) (Authenticator, error) {
	switch cfg.Auth.Mode {
	case "", "apikey":
		keys := []APIKey{{Key: apiKey, Subject: "admin", Role: RoleAdmin}}
		for i, k := range cfg.Auth.Keys {
			v := k.Key
			if k.KeyEnv != "" {
				v = os.Getenv(k.KeyEnv)
				if v == "" {
					return nil, fmt.Errorf("auth.keys[%d].key_env: environment variable %s is empty", i, k.KeyEnv)
				}
			}
			keys = append(keys, APIKey{Key: v, Subject: k.Subject, Role: k.Role, TrustUserID: k.TrustUserID, Agents: agentList(k.Agents)})
		}
		return NewKeyAuthenticator(keys), nil
	case "jwt":
		return NewJWTAuthenticator(ctx, jwtOptions(cfg))
	default:
		return nil, fmt.Errorf("auth.mode: unknown mode %q (use apikey or jwt)", cfg.Auth.Mode)
	}
}

// agentList is a key's agents allowlist: nil (every agent) when the key
// names none, so a key that lists agents may use only those.
func agentList(ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

func jwtOptions(cfg *config.Config) JWTOptions {
	secret := cfg.Auth.JWT.Secret
	if cfg.Auth.JWT.SecretEnv != "" {
		secret = os.Getenv(cfg.Auth.JWT.SecretEnv)
	}
	return JWTOptions{
		Secret: []byte(secret), Issuer: cfg.Auth.JWT.Issuer, Audience: cfg.Auth.JWT.Audience,
		RoleClaim: cfg.Auth.JWT.RoleClaim, AccessTTL: cfg.Auth.JWT.AccessTTL, RefreshTTL: cfg.Auth.JWT.RefreshTTL,
		OIDCIssuer: cfg.Auth.OIDC.Issuer, OIDCJWKSURL: cfg.Auth.OIDC.JWKSURL, OIDCAudience: cfg.Auth.OIDC.Audience,
	}
}

func decodeJSON(resp *http.Response, v any) error {
	return json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v)
}
