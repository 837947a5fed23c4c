package models

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// FleetMember is one live gateway or worker process sharing this database,
// with the fingerprint of the settings the whole fleet must agree on
// (gateway/fleetconfig.go): key -> short hash of its value, as JSON. A
// process renews SeenAt while it runs and deletes its row on a clean stop;
// a row not seen for the TTL is a process that died.
type FleetMember struct {
	ID          int64     `gorm:"primaryKey"`
	Holder      string    `gorm:"size:191;uniqueIndex;not null"`
	Fingerprint string    `gorm:"type:text;not null"`
	StartedAt   time.Time `gorm:"not null"`
	SeenAt      time.Time `gorm:"index;not null"`
}

// TableName implements gorm's Tabler.
func (FleetMember) TableName() string { return "fleet_members" }

// FleetStore is the fleet-configuration domain (fleetconfig.go).
type FleetStore interface {
	JoinFleet(ctx context.Context, m *FleetMember, ttl time.Duration, admit func(newest *FleetMember) error) error
	RenewFleetMember(ctx context.Context, holder string, now time.Time) error
	SetFleetFingerprint(ctx context.Context, holder, fingerprint string) error
	LeaveFleet(ctx context.Context, holder string) error
}

var _ FleetStore = (*Store)(nil)

// fleetLockKey serializes joins across processes on PostgreSQL (an advisory
// transaction lock), so two processes starting at once with different
// settings cannot both be admitted.
const fleetLockKey = 0x466c656574 // "Fleet"

// JoinFleet admits m: under a lock it reads the newest member seen within
// ttl (not m itself), asks admit (nil when m is the first live one), and
// records m when admit returns nil. admit's error is returned as is.
func (s *Store) JoinFleet(ctx context.Context, m *FleetMember, ttl time.Duration, admit func(newest *FleetMember) error) error {
	return s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if tx.Dialector.Name() == "postgres" {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", fleetLockKey).Error; err != nil {
				return fmt.Errorf("lock fleet_members: %w", err)
			}
		}
		if err := tx.Where("seen_at < ?", m.SeenAt.Add(-ttl)).Delete(&FleetMember{}).Error; err != nil {
			return fmt.Errorf("drop dead fleet members: %w", err)
		}
		var newest []FleetMember
		if err := tx.Where("holder <> ?", m.Holder).Order("started_at DESC, id DESC").Limit(1).Find(&newest).Error; err != nil {
			return fmt.Errorf("read fleet_members: %w", err)
		}
		var n *FleetMember
		if len(newest) == 1 {
			n = &newest[0]
		}
		if err := admit(n); err != nil {
			return err
		}
		if err := tx.Where("holder = ?", m.Holder).Delete(&FleetMember{}).Error; err != nil {
			return err
		}
		if err := tx.Create(m).Error; err != nil {
			return fmt.Errorf("record fleet member: %w", err)
		}
		return nil
	})
}

// RenewFleetMember marks holder seen at now.
func (s *Store) RenewFleetMember(ctx context.Context, holder string, now time.Time) error {
	return s.DB.WithContext(ctx).Model(&FleetMember{}).Where("holder = ?", holder).Update("seen_at", now.UTC()).Error
}

// LeaveFleet removes holder's row (a clean stop).
func (s *Store) LeaveFleet(ctx context.Context, holder string) error {
	return s.DB.WithContext(ctx).Where("holder = ?", holder).Delete(&FleetMember{}).Error
}

// SetFleetFingerprint replaces holder's fingerprint (a configuration changed
// at run time by PATCH /config).
func (s *Store) SetFleetFingerprint(ctx context.Context, holder, fingerprint string) error {
	return s.DB.WithContext(ctx).Model(&FleetMember{}).Where("holder = ?", holder).Update("fingerprint", fingerprint).Error
}
