package auth

import (
	"context"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwksCache holds an OIDC issuer's RSA signing keys by kid. An unknown kid
// triggers one refetch (at most every minimum interval), which is how key
// rotation at the issuer is picked up without a restart.
//
// Written by hand: the JWKS helper library for golang-jwt (keyfunc v3)
// depends on a module the Go proxy here does not serve, and RS256 keys from
// a JWKS are a few lines of standard library.
type jwksCache struct {
	url    string
	client *http.Client

	mu        sync.Mutex
	keys      map[string]*rsa.PublicKey
	fetchedAt time.Time
}

const jwksMinRefetch = 30 * time.Second

func newJWKSCache(ctx context.Context, client *http.Client, url string) (*jwksCache, error) {
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	c := &jwksCache{url: url, client: client}
	if err := c.fetch(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *jwksCache) keyfunc(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	c.mu.Lock()
	defer c.mu.Unlock()
	if k := c.lookup(kid); k != nil {
		return k, nil
	}
	if time.Since(c.fetchedAt) < jwksMinRefetch {
		return nil, fmt.Errorf("unknown key id %q", kid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.fetchLocked(ctx); err != nil {
		return nil, err
	}
	if k := c.lookup(kid); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("unknown key id %q", kid)
}

// lookup finds a key by kid; a token without kid matches a single-key set.
func (c *jwksCache) lookup(kid string) *rsa.PublicKey {
	if k, ok := c.keys[kid]; ok {
		return k
	}
	if kid == "" && len(c.keys) == 1 {
		for _, k := range c.keys {
			return k
		}
	}
	return nil
}

func (c *jwksCache) fetch(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fetchLocked(ctx)
}

func (c *jwksCache) fetchLocked(ctx context.Context) error {
	c.fetchedAt = time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return fmt.Errorf("load OIDC keys from %s: %w", c.url, err)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("load OIDC keys from %s: %w", c.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("load OIDC keys from %s: status %d", c.url, resp.StatusCode)
	}
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			N   string `json:"n"`
			E   string `json:"e"`
		} `json:"keys"`
	}
	if err := decodeJSON(resp, &set); err != nil {
		return fmt.Errorf("load OIDC keys from %s: %w", c.url, err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, k := range set.Keys {
		if k.Kty != "RSA" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		n, err1 := base64.RawURLEncoding.DecodeString(k.N)
		e, err2 := base64.RawURLEncoding.DecodeString(k.E)
		if err1 != nil || err2 != nil || len(e) == 0 || len(e) > 4 {
			continue
		}
		keys[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
	}
	if len(keys) == 0 {
		return errors.New("load OIDC keys from " + c.url + ": no RSA signing keys")
	}
	c.keys = keys
	return nil
}
