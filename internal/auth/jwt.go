package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWTOptions configures token verification and issuance.
type JWTOptions struct {
	Secret     []byte // HS256; may be empty when only OIDC is used
	Issuer     string
	Audience   string
	RoleClaim  string // default "role"
	AccessTTL  time.Duration
	RefreshTTL time.Duration
	// OIDCIssuer and OIDCJWKSURL accept RS256 tokens signed by the issuer's
	// published keys. JWKSURL defaults to the issuer's discovery document.
	OIDCIssuer   string
	OIDCJWKSURL  string
	OIDCAudience string
	HTTPClient   *http.Client
}

// JWTAuthenticator verifies access tokens.
type JWTAuthenticator struct {
	opts JWTOptions
	jwks *jwksCache // nil without OIDC
}

// NewJWTAuthenticator prepares verification. With an OIDC issuer it fetches
// the JWKS once now, so a wrong issuer fails at start.
func NewJWTAuthenticator(ctx context.Context, opts JWTOptions) (*JWTAuthenticator, error) {
	if opts.RoleClaim == "" {
		opts.RoleClaim = "role"
	}
	if len(opts.Secret) == 0 && opts.OIDCIssuer == "" {
		return nil, errors.New("jwt mode needs auth.jwt.secret (or secret_env) or auth.oidc.issuer")
	}
	a := &JWTAuthenticator{opts: opts}
	if opts.OIDCIssuer != "" {
		url := opts.OIDCJWKSURL
		if url == "" {
			var err error
			url, err = discoverJWKS(ctx, opts.HTTPClient, opts.OIDCIssuer)
			if err != nil {
				return nil, err
			}
		}
		jwks, err := newJWKSCache(ctx, opts.HTTPClient, url)
		if err != nil {
			return nil, err
		}
		a.jwks = jwks
	}
	return a, nil
}

// Claims are the claims we issue and read.
type Claims struct {
	jwt.RegisteredClaims
	Role        string   `json:"role,omitempty"`
	Permissions []string `json:"permissions,omitempty"`
	// TokenUse is "access" or "refresh"; a refresh token is no access token.
	TokenUse string `json:"token_use,omitempty"`
}

// Authenticate implements Authenticator.
func (a *JWTAuthenticator) Authenticate(_ context.Context, bearer string) (*Principal, error) {
	if bearer == "" {
		return nil, ErrUnauthenticated
	}
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(bearer, claims, a.keyFor, jwt.WithValidMethods([]string{"HS256", "RS256"}), jwt.WithExpirationRequired())
	if err != nil || !tok.Valid {
		return nil, ErrUnauthenticated
	}
	method := "jwt"
	if tok.Method.Alg() == "RS256" {
		method = "oidc"
		if iss, _ := claims.GetIssuer(); iss != a.opts.OIDCIssuer {
			return nil, ErrUnauthenticated
		}
		if a.opts.OIDCAudience != "" && !hasAudience(claims, a.opts.OIDCAudience) {
			return nil, ErrUnauthenticated
		}
	} else {
		if a.opts.Issuer != "" {
			if iss, _ := claims.GetIssuer(); iss != a.opts.Issuer {
				return nil, ErrUnauthenticated
			}
		}
		if a.opts.Audience != "" && !hasAudience(claims, a.opts.Audience) {
			return nil, ErrUnauthenticated
		}
		if use, _ := claims["token_use"].(string); use == "refresh" {
			return nil, ErrUnauthenticated
		}
	}
	sub, _ := claims.GetSubject()
	role, _ := claims[a.opts.RoleClaim].(string)
	if sub == "" || !ValidRole(role) {
		// A token without a known role is refused rather than downgraded, so a
		// misconfigured issuer is noticed at once.
		return nil, ErrUnauthenticated
	}
	p := &Principal{Subject: sub, Role: role, Method: method}
	if perms, ok := claims["permissions"].([]any); ok {
		for _, x := range perms {
			if s, ok := x.(string); ok {
				p.Permissions = append(p.Permissions, s)
			}
		}
	}
	return p, nil
}

func hasAudience(c jwt.MapClaims, want string) bool {
	aud, _ := c.GetAudience()
	for _, a := range aud {
		if a == want {
			return true
		}
	}
	return false
}

func (a *JWTAuthenticator) keyFor(t *jwt.Token) (any, error) {
	switch t.Method.Alg() {
	case "HS256":
		if len(a.opts.Secret) == 0 {
			return nil, errors.New("HS256 tokens are not accepted")
		}
		return a.opts.Secret, nil
	case "RS256":
		if a.jwks == nil {
			return nil, errors.New("RS256 tokens need auth.oidc.issuer")
		}
		return a.jwks.keyfunc(t)
	}
	return nil, fmt.Errorf("unexpected signing method %s", t.Method.Alg())
}

// Issue signs an HS256 access token (and a refresh token) for a subject.
func (a *JWTAuthenticator) Issue(subject, role string, permissions []string, now time.Time) (access, refresh string, err error) {
	if len(a.opts.Secret) == 0 {
		return "", "", errors.New("issuing tokens needs auth.jwt.secret")
	}
	if !ValidRole(role) {
		return "", "", fmt.Errorf("unknown role %q", role)
	}
	mk := func(use string, ttl time.Duration) (string, error) {
		c := jwt.MapClaims{
			"sub": subject, a.opts.RoleClaim: role, "token_use": use,
			"iat": now.Unix(), "exp": now.Add(ttl).Unix(),
		}
		if len(permissions) > 0 {
			c["permissions"] = permissions
		}
		if a.opts.Issuer != "" {
			c["iss"] = a.opts.Issuer
		}
		if a.opts.Audience != "" {
			c["aud"] = a.opts.Audience
		}
		return jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(a.opts.Secret)
	}
	if access, err = mk("access", a.opts.AccessTTL); err != nil {
		return "", "", err
	}
	if refresh, err = mk("refresh", a.opts.RefreshTTL); err != nil {
		return "", "", err
	}
	return access, refresh, nil
}

// Refresh exchanges a valid refresh token for a new pair.
func (a *JWTAuthenticator) Refresh(refreshToken string, now time.Time) (access, refresh string, err error) {
	claims := jwt.MapClaims{}
	tok, err := jwt.ParseWithClaims(refreshToken, claims, func(*jwt.Token) (any, error) { return a.opts.Secret, nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	if err != nil || !tok.Valid {
		return "", "", ErrUnauthenticated
	}
	if use, _ := claims["token_use"].(string); use != "refresh" {
		return "", "", ErrUnauthenticated
	}
	sub, _ := claims.GetSubject()
	role, _ := claims[a.opts.RoleClaim].(string)
	var perms []string
	if ps, ok := claims["permissions"].([]any); ok {
		for _, x := range ps {
			if s, ok := x.(string); ok {
				perms = append(perms, s)
			}
		}
	}
	return a.Issue(sub, role, perms, now)
}

func discoverJWKS(ctx context.Context, client *http.Client, issuer string) (string, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	url := strings.TrimRight(issuer, "/") + "/.well-known/openid-configuration"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", fmt.Errorf("OIDC discovery %s: %w", url, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("OIDC discovery %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("OIDC discovery %s: status %d", url, resp.StatusCode)
	}
	var doc struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := decodeJSON(resp, &doc); err != nil || doc.JWKSURI == "" {
		return "", fmt.Errorf("OIDC discovery %s: no jwks_uri", url)
	}
	return doc.JWKSURI, nil
}
