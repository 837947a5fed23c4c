// Package secrets is the gateway's write-only secret store: values set
// through the API (PUT /secrets/{name}) are sealed with AES-256-GCM before
// they are stored, can be listed by name and deleted, and are read back only
// inside the gateway (Reveal) by features that need them. No API returns a
// value and nothing here logs one.
//
// The key is 32 random bytes kept hex-encoded in the workspace credentials
// folder (credentials/secrets.key, mode 0600), created on first use. Losing
// it makes the stored values unreadable; gateways sharing one PostgreSQL
// database must share the key file.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/models"
)

// KeyFileName is the key's file name inside the credentials folder.
const KeyFileName = "secrets.key"

// MaxValueBytes bounds one secret value.
const MaxValueBytes = 64 << 10

// Errors the API maps to status codes.
var (
	ErrNotFound = fault.NotFound("secret not found")
	// ErrWrongKey: the value was sealed with another key file.
	ErrWrongKey = errors.New("secret was encrypted with a different key (credentials/secrets.key changed)")
)

// invalid is a bad name or value (400); the message never contains the value.
func invalid(msg string) error { return &fault.Invalid{Msg: msg} }

var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

// ValidName reports whether name can name a secret: a letter or _, then
// letters, digits, _, . or - (at most 128).
func ValidName(name string) bool { return nameRe.MatchString(name) }

// Store seals and stores secrets.
type Store struct {
	db      models.SecretStore
	keyPath string

	// Scrub, when set, holds every stored value (see RefreshScrub), so that
	// no outside text carries a secret out of the gateway.
	Scrub *scrub.Source

	once  sync.Once
	aead  cipher.AEAD
	keyID string
	err   error
}

// New uses the key file in credentialsDir (created when first needed).
func New(db models.SecretStore, credentialsDir string) *Store {
	return &Store{db: db, keyPath: filepath.Join(credentialsDir, KeyFileName)}
}

// KeyPath is where the encryption key lives.
func (s *Store) KeyPath() string { return s.keyPath }

func (s *Store) cipher() (cipher.AEAD, string, error) {
	s.once.Do(func() {
		key, err := loadOrCreateKey(s.keyPath)
		if err != nil {
			s.err = err
			return
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			s.err = fmt.Errorf("secrets key: %w", err)
			return
		}
		s.aead, s.err = cipher.NewGCM(block)
		sum := sha256.Sum256(key)
		s.keyID = hex.EncodeToString(sum[:8])
	})
	return s.aead, s.keyID, s.err
}

// loadOrCreateKey reads the hex key, or creates one (mode 0600, folder
// 0700). O_EXCL makes two gateways starting at once agree on one key.
func loadOrCreateKey(path string) ([]byte, error) {
	for attempt := 0; attempt < 2; attempt++ {
		data, err := os.ReadFile(path)
		if err == nil {
			key, derr := hex.DecodeString(strings.TrimSpace(string(data)))
			if derr != nil || len(key) != 32 {
				return nil, fmt.Errorf("secrets key %s: want 64 hex characters", path)
			}
			return key, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("read secrets key %s: %w", path, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("create credentials folder: %w", err)
		}
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, fmt.Errorf("generate secrets key: %w", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // someone else created it: read theirs
		}
		if err != nil {
			return nil, fmt.Errorf("create secrets key %s: %w", path, err)
		}
		_, werr := f.WriteString(hex.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(path)
			return nil, fmt.Errorf("write secrets key %s: %w", path, werr)
		}
		return key, nil
	}
	return nil, fmt.Errorf("secrets key %s: created and removed concurrently", path)
}

// Set seals value under name, replacing an earlier value.
func (s *Store) Set(ctx context.Context, name, value string) error {
	if !ValidName(name) {
		return invalid(fmt.Sprintf("secret name %q must start with a letter or _ and hold only letters, digits, _, . or - (at most 128)", name))
	}
	if value == "" {
		return invalid("secret value is empty")
	}
	if len(value) > MaxValueBytes {
		return invalid(fmt.Sprintf("secret value is larger than %d bytes", MaxValueBytes))
	}
	aead, keyID, err := s.cipher()
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("secret nonce: %w", err)
	}
	// The name is authenticated data: a sealed value cannot be moved to
	// another name in the database and still open.
	sealed := aead.Seal(nil, nonce, []byte(value), []byte(name))
	if err := s.db.PutSecret(ctx, &models.Secret{Name: name, KeyID: keyID, Nonce: nonce, Ciphertext: sealed}); err != nil {
		return fmt.Errorf("store secret %s: %w", name, err)
	}
	s.Scrub.Add(value)
	return nil
}

// RefreshScrub registers every stored value with s.Scrub (at start; a
// replaced or deleted value stays scrubbed until the next refresh, which is
// the safe side).
func (s *Store) RefreshScrub(ctx context.Context) error {
	if s.Scrub == nil {
		return nil
	}
	metas, err := s.List(ctx)
	if err != nil {
		return err
	}
	values := make([]string, 0, len(metas))
	for _, m := range metas {
		v, err := s.Reveal(ctx, m.Name)
		if err != nil {
			return err
		}
		values = append(values, v)
	}
	s.Scrub.Set(values...)
	return nil
}

// List returns the names and times of all secrets.
func (s *Store) List(ctx context.Context) ([]models.SecretMeta, error) {
	out, err := s.db.ListSecrets(ctx)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	if out == nil {
		out = []models.SecretMeta{}
	}
	return out, nil
}

// Delete removes a secret.
func (s *Store) Delete(ctx context.Context, name string) error {
	err := s.db.DeleteSecret(ctx, name)
	if errors.Is(err, models.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", name, err)
	}
	return nil
}

// Reveal opens a secret for use inside the gateway (a channel's token, a
// provider key). It is never wired to an API route.
func (s *Store) Reveal(ctx context.Context, name string) (string, error) {
	sec, err := s.db.GetSecret(ctx, name)
	if errors.Is(err, models.ErrNotFound) {
		return "", fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return "", fmt.Errorf("read secret %s: %w", name, err)
	}
	aead, keyID, err := s.cipher()
	if err != nil {
		return "", err
	}
	if sec.KeyID != keyID {
		return "", fmt.Errorf("%s: %w", name, ErrWrongKey)
	}
	plain, err := aead.Open(nil, sec.Nonce, sec.Ciphertext, []byte(name))
	if err != nil {
		return "", fmt.Errorf("open secret %s: the stored value does not authenticate", name)
	}
	return string(plain), nil
}

// Sealed is a value sealed by Seal: store all three fields.
type Sealed struct {
	KeyID      string
	Nonce      []byte
	Ciphertext []byte
}

// Seal encrypts plaintext for a feature that keeps its own rows (MCP server
// headers and env); label is authenticated data naming the owner, so a
// sealed value moved to another row does not open.
func (s *Store) Seal(label string, plaintext []byte) (Sealed, error) {
	aead, keyID, err := s.cipher()
	if err != nil {
		return Sealed{}, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return Sealed{}, fmt.Errorf("secret nonce: %w", err)
	}
	return Sealed{KeyID: keyID, Nonce: nonce, Ciphertext: aead.Seal(nil, nonce, plaintext, []byte(label))}, nil
}

// Open decrypts what Seal sealed under the same label.
func (s *Store) Open(label string, v Sealed) ([]byte, error) {
	aead, keyID, err := s.cipher()
	if err != nil {
		return nil, err
	}
	if v.KeyID != keyID {
		return nil, fmt.Errorf("%s: %w", label, ErrWrongKey)
	}
	plain, err := aead.Open(nil, v.Nonce, v.Ciphertext, []byte(label))
	if err != nil {
		return nil, fmt.Errorf("open %s: the stored value does not authenticate", label)
	}
	return plain, nil
}
