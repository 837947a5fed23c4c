package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Lease is a named singleton duty's lease (internal/lease): which process
// holds it, until when, and its epoch, raised by every takeover so that a
// holder that lost it can no longer renew it (fencing).
type Lease struct {
	Name      string `gorm:"primaryKey;size:100"`
	Holder    string `gorm:"size:191;not null"`
	Epoch     int64  `gorm:"not null"`
	ExpiresAt time.Time
	UpdatedAt time.Time
}

// TableName implements gorm's Tabler.
func (Lease) TableName() string { return "singleton_leases" }

// LeaseStore is the leases domain (leases.go); what internal/lease takes.
type LeaseStore interface {
	AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (epoch int64, ok bool, err error)
	RenewLease(ctx context.Context, name, holder string, epoch int64, now time.Time, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string, epoch int64) error
	GetLease(ctx context.Context, name string) (*Lease, error)
}

var _ LeaseStore = (*Store)(nil)

// AcquireLease takes the lease name for holder when nobody holds it, its
// holder let it expire, or holder itself held it (a restarted process of a
// stable holder id); ok is false while another holder's lease runs. Every
// acquisition raises the epoch.
func (s *Store) AcquireLease(ctx context.Context, name, holder string, now time.Time, ttl time.Duration) (int64, bool, error) {
	now = now.UTC()
	var epoch int64
	var ok bool
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).
			Create(&Lease{Name: name, Holder: holder, Epoch: 1, ExpiresAt: now.Add(ttl), UpdatedAt: now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			epoch, ok = 1, true
			return nil
		}
		res = tx.Model(&Lease{}).Where("name = ? AND (expires_at < ? OR holder = ?)", name, now, holder).
			Updates(map[string]any{"holder": holder, "epoch": gorm.Expr("epoch + 1"), "expires_at": now.Add(ttl), "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return nil
		}
		var l Lease
		if err := tx.First(&l, "name = ?", name).Error; err != nil {
			return err
		}
		if l.Holder != holder { // another took it in between (SQLite serializes; PostgreSQL read committed)
			return nil
		}
		epoch, ok = l.Epoch, true
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return epoch, ok, nil
}

// RenewLease extends holder's lease of epoch; false when it is no longer
// holder's (taken over after it expired).
func (s *Store) RenewLease(ctx context.Context, name, holder string, epoch int64, now time.Time, ttl time.Duration) (bool, error) {
	now = now.UTC()
	res := s.DB.WithContext(ctx).Model(&Lease{}).Where("name = ? AND holder = ? AND epoch = ?", name, holder, epoch).
		Updates(map[string]any{"expires_at": now.Add(ttl), "updated_at": now})
	if res.Error != nil {
		return false, fmt.Errorf("renew lease %s: %w", name, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ReleaseLease lets the lease expire now, so another process takes it at
// once (a clean shutdown); a lease taken over meanwhile is left alone.
func (s *Store) ReleaseLease(ctx context.Context, name, holder string, epoch int64) error {
	err := s.DB.WithContext(ctx).Model(&Lease{}).Where("name = ? AND holder = ? AND epoch = ?", name, holder, epoch).
		Update("expires_at", time.Unix(0, 0).UTC()).Error
	if err != nil {
		return fmt.Errorf("release lease %s: %w", name, err)
	}
	return nil
}

// GetLease reads a lease; nil when it was never taken.
func (s *Store) GetLease(ctx context.Context, name string) (*Lease, error) {
	var l Lease
	err := s.DB.WithContext(ctx).First(&l, "name = ?", name).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease %s: %w", name, err)
	}
	return &l, nil
}
