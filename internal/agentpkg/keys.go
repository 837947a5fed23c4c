package agentpkg

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// KeyID names a public key: the first 16 hex digits of its SHA-256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// ParsePublicKey reads a hex Ed25519 public key (64 hex digits).
func ParsePublicKey(text string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("not a hex Ed25519 public key (want %d hex digits)", 2*ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// ParsePrivateKey reads a hex Ed25519 private key: the 64-byte form
// (seed followed by public key, as `agentryd registry keygen` writes it) or
// the 32-byte seed.
func ParsePrivateKey(text string) (ed25519.PrivateKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil {
		return nil, fmt.Errorf("not a hex Ed25519 private key")
	}
	switch len(b) {
	case ed25519.SeedSize:
		return ed25519.NewKeyFromSeed(b), nil
	case ed25519.PrivateKeySize:
		k := ed25519.NewKeyFromSeed(b[:ed25519.SeedSize])
		if !k.Public().(ed25519.PublicKey).Equal(ed25519.PublicKey(b[ed25519.SeedSize:])) {
			return nil, fmt.Errorf("the private key's public half does not match its seed")
		}
		return k, nil
	}
	return nil, fmt.Errorf("not a hex Ed25519 private key (want %d or %d hex digits)", 2*ed25519.SeedSize, 2*ed25519.PrivateKeySize)
}

// LoadPrivateKeyFile reads a key file written by `agentryd registry keygen`.
// A file readable by others is refused: the key signs what others trust.
func LoadPrivateKeyFile(path string) (ed25519.PrivateKey, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("signing key %s: mode %04o lets others read it; run chmod 600 %s", path, st.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	k, err := ParsePrivateKey(string(data))
	if err != nil {
		return nil, fmt.Errorf("signing key %s: %w", path, err)
	}
	return k, nil
}
