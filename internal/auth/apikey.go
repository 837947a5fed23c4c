package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// APIKey is one accepted key and who it stands for.
type APIKey struct {
	Key     string
	Subject string
	Role    string
	// TrustUserID: see config.APIKeyConfig.TrustUserID.
	TrustUserID bool
	// Agents: see config.APIKeyConfig.Agents (nil: every agent).
	Agents []string
}

// KeyAuthenticator accepts a fixed set of API keys. Keys are compared as
// SHA-256 digests in constant time so neither the key's length nor its
// prefix leaks through timing.
type KeyAuthenticator struct {
	keys []hashedKey
}

type hashedKey struct {
	digest [32]byte
	p      Principal
}

// NewKeyAuthenticator builds an authenticator; empty keys are ignored.
func NewKeyAuthenticator(keys []APIKey) *KeyAuthenticator {
	a := &KeyAuthenticator{}
	for _, k := range keys {
		if k.Key == "" {
			continue
		}
		a.keys = append(a.keys, hashedKey{digest: sha256.Sum256([]byte(k.Key)), p: Principal{Subject: k.Subject, Role: k.Role, Method: "apikey", TrustUserID: k.TrustUserID, Agents: k.Agents}})
	}
	return a
}

// Authenticate implements Authenticator.
func (a *KeyAuthenticator) Authenticate(_ context.Context, bearer string) (*Principal, error) {
	if bearer == "" {
		return nil, ErrUnauthenticated
	}
	d := sha256.Sum256([]byte(bearer))
	var found *Principal
	// Compare against every key, without an early exit.
	for i := range a.keys {
		if subtle.ConstantTimeCompare(d[:], a.keys[i].digest[:]) == 1 {
			p := a.keys[i].p
			found = &p
		}
	}
	if found == nil {
		return nil, ErrUnauthenticated
	}
	return found, nil
}

// LoadOrCreateKey returns the key stored at path, creating a random one
// (mode 0600, in a 0700 folder) when there is none. created tells the caller
// to print it once.
func LoadOrCreateKey(path string) (key string, created bool, err error) {
	data, err := os.ReadFile(path)
	if err == nil {
		key = strings.TrimSpace(string(data))
		if key != "" {
			return key, false, nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Errorf("read api key %s: %w", path, err)
	}
	buf := make([]byte, 32)
	if _, err := rand.Read(buf); err != nil {
		return "", false, fmt.Errorf("generate api key: %w", err)
	}
	key = "agk_" + hex.EncodeToString(buf)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	// O_EXCL: two processes starting at once must not both write a key.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadOrCreateKey(path)
	}
	if err != nil {
		return "", false, fmt.Errorf("write api key %s: %w", path, err)
	}
	defer f.Close()
	if _, err := f.WriteString(key + "\n"); err != nil {
		return "", false, fmt.Errorf("write api key %s: %w", path, err)
	}
	return key, true, nil
}
