package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Idempotency record states.
const (
	IdempotencyRunning = "running"
	IdempotencyDone    = "done"
)

// WebhookIdempotency remembers the reply of an inbound webhook sent with an
// Idempotency-Key, so a repeat returns the first reply instead of running
// the agent again. Key is a digest of subject, agent and the header value.
//
// A running record is a claim: Owner names the request that holds it and
// LeaseUntil is how long the claim stands without news from that owner. The
// owner renews the lease while it runs; a claim whose lease ran out belongs
// to a process that died and is taken over by the next request.
type WebhookIdempotency struct {
	Key        string `gorm:"primaryKey;column:idem_key;size:64"`
	AgentID    string `gorm:"size:100"`
	BodyHash   string `gorm:"size:64"`
	Status     string `gorm:"size:16"`
	Owner      string `gorm:"size:64"`
	LeaseUntil time.Time
	Response   string // JSON of the reply, when done
	CreatedAt  time.Time
	UpdatedAt  time.Time
	ExpiresAt  time.Time `gorm:"index"`
}

// ClaimIdempotency tries to take key for rec.Owner, with a lease of lease.
// It returns (nil, true) when the caller owns the key now and must run, or
// the existing record and false. Expired records, and running ones whose
// lease ran out (their owner died), are replaced. The insert is atomic, so
// of two concurrent requests exactly one runs.
func (s *Store) ClaimIdempotency(ctx context.Context, rec *WebhookIdempotency, lease time.Duration) (*WebhookIdempotency, bool, error) {
	var existing *WebhookIdempotency
	claimed := false
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		// Expired or abandoned records of this key make way.
		if err := tx.Where("idem_key = ? AND (expires_at < ? OR (status = ? AND lease_until < ?))", rec.Key, now, IdempotencyRunning, now).
			Delete(&WebhookIdempotency{}).Error; err != nil {
			return err
		}
		rec.Status, rec.CreatedAt, rec.UpdatedAt, rec.LeaseUntil = IdempotencyRunning, now, now, now.Add(lease)
		res := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "idem_key"}}, DoNothing: true}).Create(rec)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			claimed = true
			return nil
		}
		var have WebhookIdempotency
		if err := tx.First(&have, "idem_key = ?", rec.Key).Error; err != nil {
			return err
		}
		existing = &have
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("idempotency key: %w", err)
	}
	return existing, claimed, nil
}

// RenewIdempotency extends owner's claim on key to now+lease. It returns
// false when the claim is no longer owner's (taken over after its lease ran
// out, or finished).
func (s *Store) RenewIdempotency(ctx context.Context, key, owner string, lease time.Duration) (bool, error) {
	now := time.Now().UTC()
	res := s.DB.WithContext(ctx).Model(&WebhookIdempotency{}).
		Where("idem_key = ? AND owner = ? AND status = ?", key, owner, IdempotencyRunning).
		Updates(map[string]any{"lease_until": now.Add(lease), "updated_at": now})
	if res.Error != nil {
		return false, fmt.Errorf("idempotency key: %w", res.Error)
	}
	return res.RowsAffected == 1, nil
}

// GetIdempotency reads a record (ErrNotFound when gone).
func (s *Store) GetIdempotency(ctx context.Context, key string) (*WebhookIdempotency, error) {
	var r WebhookIdempotency
	err := s.DB.WithContext(ctx).First(&r, "idem_key = ?", key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("idempotency key: %w", err)
	}
	return &r, nil
}

// CompleteIdempotency stores the reply of the run that claimed key, if the
// claim is still owner's.
func (s *Store) CompleteIdempotency(ctx context.Context, key, owner, response string) error {
	err := s.DB.WithContext(ctx).Model(&WebhookIdempotency{}).Where("idem_key = ? AND owner = ?", key, owner).
		Updates(map[string]any{"status": IdempotencyDone, "response": response, "updated_at": time.Now().UTC()}).Error
	if err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	return nil
}

// ReleaseIdempotency forgets owner's claim whose run failed, so a retry runs.
func (s *Store) ReleaseIdempotency(ctx context.Context, key, owner string) error {
	err := s.DB.WithContext(ctx).Where("idem_key = ? AND owner = ? AND status = ?", key, owner, IdempotencyRunning).Delete(&WebhookIdempotency{}).Error
	if err != nil {
		return fmt.Errorf("idempotency key: %w", err)
	}
	return nil
}

// PurgeIdempotency deletes expired records.
func (s *Store) PurgeIdempotency(ctx context.Context) (int64, error) {
	res := s.DB.WithContext(ctx).Where("expires_at < ?", time.Now().UTC()).Delete(&WebhookIdempotency{})
	return res.RowsAffected, res.Error
}
