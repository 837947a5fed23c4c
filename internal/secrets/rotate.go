package secrets

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentryhq/agentry/models"
)

// RotateResult is what Rotate did.
type RotateResult struct {
	Provider string `json:"provider"`
	// Rewrapped data keys: unwrapped and wrapped again by the provider,
	// which uses its current key version (rotate the key in the provider
	// first: `vault write -f transit/keys/agentry/rotate`, or the KMS key's
	// rotation).
	Rewrapped int `json:"rewrapped"`
	// Resealed values: secrets sealed before data keys (directly with the
	// key file), now sealed with the active data key.
	Resealed int `json:"resealed"`
	// Skipped data keys wrapped by another provider (credentials.provider
	// changed): they are left as they are and their values stay unreadable
	// until that provider is configured again.
	Skipped int `json:"skipped"`
}

// Rotate re-wraps every data key of the configured provider with the
// provider's current key version, then re-seals the secrets still sealed
// directly with the key file. Values sealed with a data key are untouched,
// and a data key opens the same before, during and after: no downtime, and
// a rotation interrupted half-way is finished by running it again.
func (s *Store) Rotate(ctx context.Context) (RotateResult, error) {
	res := RotateResult{Provider: s.provider}
	keeper, keyURL, err := s.wrapper()
	if err != nil {
		return res, err
	}
	keys, err := s.db.ListSecretKeys(ctx)
	if err != nil {
		return res, fmt.Errorf("read data keys: %w", err)
	}
	for _, k := range keys {
		if k.Provider != keyURL {
			res.Skipped++
			continue
		}
		plain, err := s.call(ctx, "unwrap data key "+DataKeyPrefix+k.ID, func(ctx context.Context) ([]byte, error) { return keeper.Decrypt(ctx, k.Wrapped) })
		if err != nil {
			return res, err
		}
		wrapped, err := s.call(ctx, "re-wrap data key "+DataKeyPrefix+k.ID, func(ctx context.Context) ([]byte, error) { return keeper.Encrypt(ctx, plain) })
		clear(plain)
		if err != nil {
			return res, err
		}
		if err := s.db.RewrapSecretKey(ctx, k.ID, wrapped); err != nil {
			return res, fmt.Errorf("store re-wrapped data key %s%s: %w", DataKeyPrefix, k.ID, err)
		}
		res.Rewrapped++
	}
	sealed, err := s.db.ListSealedSecrets(ctx)
	if err != nil {
		return res, fmt.Errorf("read secrets: %w", err)
	}
	for _, sec := range sealed {
		if strings.HasPrefix(sec.KeyID, DataKeyPrefix) {
			continue
		}
		value, err := s.Reveal(ctx, sec.Name)
		if err != nil {
			return res, err
		}
		aead, keyID, err := s.activeKey(ctx)
		if err != nil {
			return res, err
		}
		nonce, ct, err := seal(aead, []byte(value), sec.Name)
		if err != nil {
			return res, err
		}
		ok, err := s.db.ResealSecret(ctx, &models.Secret{Name: sec.Name, KeyID: keyID, Nonce: nonce, Ciphertext: ct}, sec.KeyID)
		if err != nil {
			return res, fmt.Errorf("re-seal secret %s: %w", sec.Name, err)
		}
		if ok {
			res.Resealed++
		}
	}
	return res, nil
}
