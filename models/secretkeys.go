package models

import (
	"context"
	"time"
)

// SecretKey is one data key of the secret store (envelope encryption): 32
// random bytes that seal secret values, kept here only wrapped
// (encrypted) by the credentials provider: the local key file, a Vault
// transit key or a cloud KMS key. Rows of Secret (and the sealed values of
// other tables) name their data key by KeyID "dk:<ID>".
type SecretKey struct {
	ID string `gorm:"primaryKey;size:32"`
	// Provider is the provider and key that wrapped it, without any
	// credential (for example "hashivault://agentry").
	Provider string `gorm:"size:512"`
	// Wrapped is the data key as the provider encrypted it.
	Wrapped   []byte
	CreatedAt time.Time
	// RewrappedAt is the last `agentry secret rotate` that re-wrapped it.
	RewrappedAt *time.Time
}

// PutSecretKey stores a new data key.
func (s *Store) PutSecretKey(ctx context.Context, k *SecretKey) error {
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now().UTC()
	}
	return s.DB.WithContext(ctx).Create(k).Error
}

// ListSecretKeys returns every data key, oldest first.
func (s *Store) ListSecretKeys(ctx context.Context) ([]SecretKey, error) {
	var out []SecretKey
	err := s.DB.WithContext(ctx).Order("created_at, id").Find(&out).Error
	return out, err
}

// RewrapSecretKey replaces a data key's wrapped form (the same key,
// wrapped again by the provider's current key version).
func (s *Store) RewrapSecretKey(ctx context.Context, id string, wrapped []byte) error {
	now := time.Now().UTC()
	res := s.DB.WithContext(ctx).Model(&SecretKey{}).Where("id = ?", id).
		Updates(map[string]any{"wrapped": wrapped, "rewrapped_at": now})
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// ListSealedSecrets returns every secret with its sealed value (for
// re-sealing by rotation; values stay encrypted).
func (s *Store) ListSealedSecrets(ctx context.Context) ([]Secret, error) {
	var out []Secret
	err := s.DB.WithContext(ctx).Order("name").Find(&out).Error
	return out, err
}

// ResealSecret replaces a secret's sealed value when it is still sealed
// with oldKeyID (a value set meanwhile is left alone); it reports whether
// the row was replaced.
func (s *Store) ResealSecret(ctx context.Context, sec *Secret, oldKeyID string) (bool, error) {
	res := s.DB.WithContext(ctx).Model(&Secret{}).Where("name = ? AND key_id = ?", sec.Name, oldKeyID).
		Updates(map[string]any{"key_id": sec.KeyID, "nonce": sec.Nonce, "ciphertext": sec.Ciphertext})
	return res.RowsAffected > 0, res.Error
}
