// Package secrets is the gateway's write-only secret store: values set
// through the API (PUT /secrets/{name}) are sealed with AES-256-GCM before
// they are stored, can be listed by name and deleted, and are read back only
// inside the gateway (Reveal) by features that need them. No API returns a
// value and nothing here logs one.
//
// Envelope encryption (docs/credentials.md): values are sealed with a data
// key (32 random bytes, table secret_keys) that is stored only wrapped by
// the credentials provider (credentials.provider): the local key file
// (credentials/secrets.key, default), a Vault/OpenBao transit key or a
// cloud KMS key, all through gocloud.dev/secrets keepers. An unwrapped data
// key is cached in memory for credentials.cache_ttl: reads keep working
// that long when the provider becomes unreachable; a write always asks the
// provider first, so it fails clearly while the provider is down. Rotate
// re-wraps every data key with the provider's current key version (the
// values themselves are untouched: no downtime).
//
// Values sealed before envelope encryption (KeyID = a digest prefix of the
// key file) are still opened with the key file, and Rotate re-seals them.
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
	"strings"
	"sync"
	"time"

	"gocloud.dev/secrets/localsecrets"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/secrets/seed"
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

// ValidName reports whether name can name a secret: a letter or _, then
// letters, digits, _, . or - (at most 128).
func ValidName(name string) bool { return seed.ValidName(name) }

// Store seals and stores secrets.
type Store struct {
	db      models.SecretStore
	keyPath string

	// Scrub, when set, holds every stored value (see RefreshScrub), so that
	// no outside text carries a secret out of the gateway.
	Scrub *scrub.Source

	provider string // credentials.provider
	keyURL   string // the provider's key, as recorded on the data keys
	keeper   Keeper // nil: the local key file's keeper, built on first use
	ttl      time.Duration
	timeout  time.Duration
	now      func() time.Time

	fileOnce  sync.Once
	fileAEAD  cipher.AEAD // the key file itself (values sealed before data keys)
	fileKeyID string
	fileErr   error

	mu    sync.Mutex
	cache map[string]*dataKey // data key id -> unwrapped key
}

// A dataKey is an unwrapped data key and when the provider last gave it.
type dataKey struct {
	aead cipher.AEAD
	at   time.Time
}

// Keeper wraps and unwraps data keys: a gocloud.dev *secrets.Keeper.
type Keeper interface {
	Encrypt(ctx context.Context, plaintext []byte) ([]byte, error)
	Decrypt(ctx context.Context, ciphertext []byte) ([]byte, error)
}

// Defaults of credentials.cache_ttl and credentials.timeout.
const (
	DefaultCacheTTL = time.Hour
	DefaultTimeout  = 10 * time.Second
)

// Options choose the provider of a Store (see OpenProvider).
type Options struct {
	// Provider names it in errors ("local" when empty).
	Provider string
	// KeyURL is the provider's key without credentials
	// ("hashivault://agentry"); recorded on each data key it wraps.
	KeyURL string
	// Keeper wraps data keys; nil is the local key file.
	Keeper   Keeper
	CacheTTL time.Duration
	Timeout  time.Duration
	// Now is the clock of the cache (tests).
	Now func() time.Time
}

// New uses the key file in credentialsDir (created when first needed): the
// local provider.
func New(db models.SecretStore, credentialsDir string) *Store {
	return NewWith(db, credentialsDir, Options{})
}

// NewWith uses the provider of o.
func NewWith(db models.SecretStore, credentialsDir string, o Options) *Store {
	s := &Store{db: db, keyPath: filepath.Join(credentialsDir, KeyFileName), provider: o.Provider, keyURL: o.KeyURL,
		keeper: o.Keeper, ttl: o.CacheTTL, timeout: o.Timeout, now: o.Now, cache: map[string]*dataKey{}}
	if s.provider == "" {
		s.provider = "local"
	}
	if s.ttl <= 0 {
		s.ttl = DefaultCacheTTL
	}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// KeyPath is where the local encryption key lives.
func (s *Store) KeyPath() string { return s.keyPath }

// Provider is credentials.provider.
func (s *Store) Provider() string { return s.provider }

// fileCipher is the key file (created on first use). For the local
// provider it also makes the keeper that wraps data keys.
func (s *Store) fileCipher() (cipher.AEAD, string, error) {
	s.fileOnce.Do(func() {
		key, err := loadOrCreateKey(s.keyPath)
		if err != nil {
			s.fileErr = err
			return
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			s.fileErr = fmt.Errorf("secrets key: %w", err)
			return
		}
		s.fileAEAD, s.fileErr = cipher.NewGCM(block)
		sum := sha256.Sum256(key)
		s.fileKeyID = hex.EncodeToString(sum[:8])
		if s.keeper == nil && s.fileErr == nil {
			s.keeper = localsecrets.NewKeeper([32]byte(key))
			s.keyURL = "local:" + s.fileKeyID
		}
	})
	return s.fileAEAD, s.fileKeyID, s.fileErr
}

// wrapper is the provider's keeper (for local, the key file's).
func (s *Store) wrapper() (Keeper, string, error) {
	if s.provider == "local" {
		if _, _, err := s.fileCipher(); err != nil {
			return nil, "", err
		}
	}
	return s.keeper, s.keyURL, nil
}

// DataKeyPrefix starts the KeyID of a value sealed with a data key.
const DataKeyPrefix = "dk:"

// ProviderError is a credentials provider that did not wrap or unwrap a
// data key (unreachable, or it refused: a wrong token, a disabled key).
// The API answers 503 with the provider's reason; no key material is in it.
type ProviderError struct {
	Provider, KeyURL, Op string
	Err                  error
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("credentials provider %s (%s) did not %s: %v", e.Provider, e.KeyURL, e.Op, e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }

// Fault implements fault.Fault: 503 "credentials_unavailable".
func (e *ProviderError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindUnavailable, Code: "credentials_unavailable"}
}

func (s *Store) call(ctx context.Context, op string, f func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := f(ctx)
	if err != nil {
		if s.provider == "local" {
			return nil, ErrWrongKey
		}
		return nil, &ProviderError{Provider: s.provider, KeyURL: s.keyURL, Op: op, Err: err}
	}
	return out, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("data key: %w", err)
	}
	return cipher.NewGCM(block)
}

// openKey returns data key id unwrapped. A read (fresh false) is served
// from the cache while the provider last gave the key less than the cache
// TTL ago; a write (fresh true) always asks the provider, so that nothing
// new is sealed under a key the provider no longer grants.
func (s *Store) openKey(ctx context.Context, id string, fresh bool) (cipher.AEAD, error) {
	s.mu.Lock()
	dk := s.cache[id]
	s.mu.Unlock()
	if dk != nil && !fresh && s.now().Sub(dk.at) < s.ttl {
		return dk.aead, nil
	}
	keeper, keyURL, err := s.wrapper()
	if err != nil {
		return nil, err
	}
	keys, err := s.db.ListSecretKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("read data keys: %w", err)
	}
	var row *models.SecretKey
	for i := range keys {
		if keys[i].ID == id {
			row = &keys[i]
		}
	}
	if row == nil {
		return nil, fmt.Errorf("data key %s%s is not in the database: %w", DataKeyPrefix, id, ErrWrongKey)
	}
	if row.Provider != keyURL {
		return nil, fmt.Errorf("data key %s%s was wrapped by %s, but the configured credentials are %s (credentials.provider %s): %w",
			DataKeyPrefix, id, row.Provider, keyURL, s.provider, ErrWrongKey)
	}
	plain, err := s.call(ctx, "unwrap data key "+DataKeyPrefix+id, func(ctx context.Context) ([]byte, error) { return keeper.Decrypt(ctx, row.Wrapped) })
	if err != nil {
		if dk != nil && !fresh {
			return nil, fmt.Errorf("%w (the cached data key expired: credentials.cache_ttl is %s)", err, s.ttl)
		}
		return nil, err
	}
	if len(plain) != 32 {
		return nil, fmt.Errorf("data key %s%s: unwrapped to %d bytes, want 32", DataKeyPrefix, id, len(plain))
	}
	aead, err := newAEAD(plain)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cache[id] = &dataKey{aead: aead, at: s.now()}
	s.mu.Unlock()
	return aead, nil
}

// activeKey is the data key new values are sealed with: the newest one the
// configured provider wrapped, or a new one. It always asks the provider.
func (s *Store) activeKey(ctx context.Context) (cipher.AEAD, string, error) {
	keeper, keyURL, err := s.wrapper()
	if err != nil {
		return nil, "", err
	}
	keys, err := s.db.ListSecretKeys(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("read data keys: %w", err)
	}
	for i := len(keys) - 1; i >= 0; i-- {
		if keys[i].Provider == keyURL {
			aead, err := s.openKey(ctx, keys[i].ID, true)
			return aead, DataKeyPrefix + keys[i].ID, err
		}
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, "", fmt.Errorf("generate data key: %w", err)
	}
	wrapped, err := s.call(ctx, "wrap a new data key", func(ctx context.Context) ([]byte, error) { return keeper.Encrypt(ctx, key) })
	if err != nil {
		return nil, "", err
	}
	idb := make([]byte, 8)
	if _, err := rand.Read(idb); err != nil {
		return nil, "", fmt.Errorf("data key id: %w", err)
	}
	id := hex.EncodeToString(idb)
	if err := s.db.PutSecretKey(ctx, &models.SecretKey{ID: id, Provider: keyURL, Wrapped: wrapped}); err != nil {
		return nil, "", fmt.Errorf("store data key: %w", err)
	}
	aead, err := newAEAD(key)
	if err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	s.cache[id] = &dataKey{aead: aead, at: s.now()}
	s.mu.Unlock()
	return aead, DataKeyPrefix + id, nil
}

// opener is the cipher that opens a value sealed under keyID.
func (s *Store) opener(ctx context.Context, keyID string) (cipher.AEAD, error) {
	if id, ok := strings.CutPrefix(keyID, DataKeyPrefix); ok {
		return s.openKey(ctx, id, false)
	}
	// Sealed before data keys: with the key file directly.
	if _, err := os.Stat(s.keyPath); errors.Is(err, fs.ErrNotExist) {
		return nil, ErrWrongKey
	}
	aead, fileID, err := s.fileCipher()
	if err != nil {
		return nil, err
	}
	if keyID != fileID {
		return nil, ErrWrongKey
	}
	return aead, nil
}

func seal(aead cipher.AEAD, plaintext []byte, label string) (nonce, sealed []byte, err error) {
	nonce = make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, nil, fmt.Errorf("secret nonce: %w", err)
	}
	return nonce, aead.Seal(nil, nonce, plaintext, []byte(label)), nil
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
	aead, keyID, err := s.activeKey(ctx)
	if err != nil {
		return fmt.Errorf("secret %s not stored: %w", name, err)
	}
	// The name is authenticated data: a sealed value cannot be moved to
	// another name in the database and still open.
	nonce, sealed, err := seal(aead, []byte(value), name)
	if err != nil {
		return err
	}
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
	aead, err := s.opener(ctx, sec.KeyID)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
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
	ctx := context.Background()
	aead, keyID, err := s.activeKey(ctx)
	if err != nil {
		return Sealed{}, err
	}
	nonce, sealed, err := seal(aead, plaintext, label)
	if err != nil {
		return Sealed{}, err
	}
	return Sealed{KeyID: keyID, Nonce: nonce, Ciphertext: sealed}, nil
}

// Open decrypts what Seal sealed under the same label.
func (s *Store) Open(label string, v Sealed) ([]byte, error) {
	aead, err := s.opener(context.Background(), v.KeyID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	plain, err := aead.Open(nil, v.Nonce, v.Ciphertext, []byte(label))
	if err != nil {
		return nil, fmt.Errorf("open %s: the stored value does not authenticate", label)
	}
	return plain, nil
}
