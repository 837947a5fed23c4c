package models

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Secret is one write-only secret, encrypted by internal/secrets before it
// reaches this table: the database never holds a plaintext value.
type Secret struct {
	Name string `gorm:"primaryKey;size:191"`
	// KeyID names the encryption key (a digest prefix of it), so a value
	// sealed with another workspace's key is reported, not garbled.
	KeyID      string `gorm:"size:32"`
	Nonce      []byte
	Ciphertext []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// SecretMeta is what may be listed about a secret: never its value.
type SecretMeta struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PutSecret creates or replaces a secret.
func (s *Store) PutSecret(ctx context.Context, sec *Secret) error {
	now := time.Now().UTC()
	sec.CreatedAt, sec.UpdatedAt = now, now
	return s.DB.WithContext(ctx).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "name"}},
		DoUpdates: clause.Assignments(map[string]any{"key_id": sec.KeyID, "nonce": sec.Nonce, "ciphertext": sec.Ciphertext, "updated_at": now}),
	}).Create(sec).Error
}

// GetSecret returns one sealed secret, or ErrNotFound.
func (s *Store) GetSecret(ctx context.Context, name string) (*Secret, error) {
	var sec Secret
	err := s.DB.WithContext(ctx).First(&sec, "name = ?", name).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	return &sec, err
}

// ListSecrets returns the names and times of all secrets, by name. The
// sealed values are not even read.
func (s *Store) ListSecrets(ctx context.Context) ([]SecretMeta, error) {
	var out []SecretMeta
	err := s.DB.WithContext(ctx).Model(&Secret{}).Select("name", "created_at", "updated_at").Order("name").Scan(&out).Error
	return out, err
}

// DeleteSecret removes a secret, or returns ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, name string) error {
	res := s.DB.WithContext(ctx).Delete(&Secret{}, "name = ?", name)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}
