package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Delivery statuses.
const (
	// DeliveryPending: the message is queued, no attempt has finished yet.
	DeliveryPending = "pending"
	// DeliveryRetrying: the last attempt failed and another will follow.
	DeliveryRetrying = "retrying"
	// DeliveryDelivered: the receiver answered 2xx.
	DeliveryDelivered = "delivered"
	// DeliveryFailed: no attempt succeeded and none will follow (a 4xx
	// other than 429, a refused destination, or the retry time ran out).
	DeliveryFailed = "failed"
)

// Delivery is one outbound message (channel send, scheduled output, event
// hook) and its current outcome. Its ID is the X-Agentry-Delivery header,
// the same for every attempt.
type Delivery struct {
	ID string `gorm:"primaryKey;size:64"`
	// Channel is "webhook" for the webhook channel, "hook:<key>" for an
	// event hook.
	Channel string `gorm:"size:100;index:idx_deliveries_channel_created,priority:1"`
	// Source is what produced the message: api, schedule, hook.
	Source  string `gorm:"size:32"`
	AgentID string `gorm:"size:100"`
	// Target is the destination without query string or user info (those
	// may carry credentials).
	Target     string `gorm:"size:512"`
	WorkflowID string `gorm:"size:191"`
	Status     string `gorm:"size:16;index"`
	Attempts   int
	// LastStatusCode is the HTTP status of the last attempt (0: no answer).
	LastStatusCode int
	LastError      string
	// StartInput is the outbox: the Delivery workflow's input (JSON of
	// workflows.DeliveryInput), written with the record and emptied once the
	// workflow has been started. A record whose StartInput is still set
	// after a crash is started by the sweep (delivery.Service.Sweep), so
	// the record and its workflow cannot part.
	StartInput  string    `json:"-"`
	CreatedAt   time.Time `gorm:"index:idx_deliveries_channel_created,priority:2"`
	UpdatedAt   time.Time
	DeliveredAt *time.Time
}

// DeliveryAttempt is one HTTP request of a delivery.
type DeliveryAttempt struct {
	ID         int64  `gorm:"primaryKey"`
	DeliveryID string `gorm:"size:64;uniqueIndex:idx_delivery_attempts_attempt,priority:1"`
	Attempt    int    `gorm:"uniqueIndex:idx_delivery_attempts_attempt,priority:2"`
	StatusCode int
	Error      string
	DurationMs int64
	At         time.Time
}

// AttemptRecord is what one attempt reports; RecordAttempt stores it and
// brings the delivery row up to date.
type AttemptRecord struct {
	Delivery   Delivery // identity fields (ID, Channel, Source, AgentID, Target, WorkflowID)
	Attempt    int
	StatusCode int
	Error      string
	Duration   time.Duration
	// Final is true when no further attempt follows (success or a
	// non-retryable failure).
	Final     bool
	Delivered bool
}

// CreateDelivery records a queued message (idempotent by ID).
func (s *Store) CreateDelivery(ctx context.Context, d *Delivery) error {
	now := time.Now().UTC()
	if d.Status == "" {
		d.Status = DeliveryPending
	}
	d.CreatedAt, d.UpdatedAt = now, now
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(d).Error
	if err != nil {
		return fmt.Errorf("record delivery %s: %w", d.ID, err)
	}
	return nil
}

// RecordAttempt stores one attempt and updates the delivery (created when
// missing, e.g. for deliveries started as child workflows) in one
// transaction. Repeating the same attempt number is a no-op for the
// attempt row, so a retried recording does not double count.
func (s *Store) RecordAttempt(ctx context.Context, r AttemptRecord) error {
	return s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		d := r.Delivery
		d.Status, d.CreatedAt, d.UpdatedAt = DeliveryPending, now, now
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, DoNothing: true}).Create(&d).Error; err != nil {
			return fmt.Errorf("record delivery %s: %w", d.ID, err)
		}
		att := DeliveryAttempt{DeliveryID: d.ID, Attempt: r.Attempt, StatusCode: r.StatusCode, Error: r.Error,
			DurationMs: r.Duration.Milliseconds(), At: now}
		if err := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&att).Error; err != nil {
			return fmt.Errorf("record attempt %d of delivery %s: %w", r.Attempt, d.ID, err)
		}
		status := DeliveryRetrying
		switch {
		case r.Delivered:
			status = DeliveryDelivered
		case r.Final:
			status = DeliveryFailed
		}
		// An attempt proves the workflow runs: the outbox entry is done.
		upd := map[string]any{"status": status, "attempts": gorm.Expr("CASE WHEN attempts < ? THEN ? ELSE attempts END", r.Attempt, r.Attempt),
			"last_status_code": r.StatusCode, "last_error": r.Error, "updated_at": now, "start_input": ""}
		if r.Delivered {
			upd["delivered_at"] = now
		}
		// A late recording of an older attempt must not undo a final state.
		q := tx.Model(&Delivery{}).Where("id = ?", d.ID)
		if !r.Delivered {
			q = q.Where("status <> ?", DeliveryDelivered)
		}
		if err := q.Updates(upd).Error; err != nil {
			return fmt.Errorf("update delivery %s: %w", d.ID, err)
		}
		return nil
	})
}

// UnstartedDeliveries returns up to limit pending deliveries created before
// before whose workflow may not have been started (their outbox entry is
// still set), oldest first. A scheduled output named by its firing's record
// (and that firing not failed) is left out: the firing's workflow starts it
// as a child, and recovers itself after a crash.
func (s *Store) UnstartedDeliveries(ctx context.Context, before time.Time, limit int) ([]Delivery, error) {
	var out []Delivery
	err := s.DB.WithContext(ctx).Where("start_input <> '' AND status = ? AND created_at < ?", DeliveryPending, before.UTC()).
		Where("NOT EXISTS (SELECT 1 FROM schedule_runs r WHERE r.delivery_id = deliveries.id AND r.status <> ?)", ScheduleRunFailed).
		Order("created_at").Limit(limit).Find(&out).Error
	if err != nil {
		return nil, fmt.Errorf("read unstarted deliveries: %w", err)
	}
	return out, nil
}

// MarkDeliveryStarted empties the outbox entry of a delivery whose workflow
// has been started.
func (s *Store) MarkDeliveryStarted(ctx context.Context, id string) error {
	err := s.DB.WithContext(ctx).Model(&Delivery{}).Where("id = ?", id).Update("start_input", "").Error
	if err != nil {
		return fmt.Errorf("mark delivery %s started: %w", id, err)
	}
	return nil
}

// FinishDelivery sets the final status of a delivery whose retries ended
// (it is never downgraded from delivered).
func (s *Store) FinishDelivery(ctx context.Context, id, status, lastError string) error {
	upd := map[string]any{"status": status, "updated_at": time.Now().UTC(), "start_input": ""}
	if lastError != "" {
		upd["last_error"] = lastError
	}
	err := s.DB.WithContext(ctx).Model(&Delivery{}).Where("id = ? AND status <> ?", id, DeliveryDelivered).Updates(upd).Error
	if err != nil {
		return fmt.Errorf("finish delivery %s: %w", id, err)
	}
	return nil
}

// GetDelivery returns a delivery with its attempts (oldest first).
func (s *Store) GetDelivery(ctx context.Context, id string) (*Delivery, []DeliveryAttempt, error) {
	var d Delivery
	err := s.DB.WithContext(ctx).First(&d, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil, ErrNotFound
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read delivery %s: %w", id, err)
	}
	var atts []DeliveryAttempt
	if err := s.DB.WithContext(ctx).Where("delivery_id = ?", id).Order("attempt").Find(&atts).Error; err != nil {
		return nil, nil, fmt.Errorf("read attempts of delivery %s: %w", id, err)
	}
	return &d, atts, nil
}

// ListDeliveries returns the newest deliveries, optionally of one channel.
func (s *Store) ListDeliveries(ctx context.Context, channel string, limit int) ([]Delivery, error) {
	if limit <= 0 {
		limit = 50
	}
	q := s.DB.WithContext(ctx).Order("created_at DESC").Limit(limit)
	if channel != "" {
		q = q.Where("channel = ?", channel)
	}
	var out []Delivery
	if err := q.Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list deliveries: %w", err)
	}
	return out, nil
}

// ChannelStats summarizes the deliveries of a channel.
type ChannelStats struct {
	Deliveries int64 // delivered messages
	Failures   int64 // messages that failed for good
	Pending    int64 // pending or retrying
	Last       *Delivery
}

// ChannelStats counts a channel's deliveries and returns the newest.
func (s *Store) ChannelStats(ctx context.Context, channel string) (ChannelStats, error) {
	var st ChannelStats
	type row struct {
		Status string
		N      int64
	}
	var rows []row
	err := s.DB.WithContext(ctx).Model(&Delivery{}).Select("status, COUNT(*) AS n").Where("channel = ?", channel).Group("status").Scan(&rows).Error
	if err != nil {
		return st, fmt.Errorf("count deliveries of %s: %w", channel, err)
	}
	for _, r := range rows {
		switch r.Status {
		case DeliveryDelivered:
			st.Deliveries += r.N
		case DeliveryFailed:
			st.Failures += r.N
		default:
			st.Pending += r.N
		}
	}
	var last Delivery
	err = s.DB.WithContext(ctx).Where("channel = ?", channel).Order("updated_at DESC").Limit(1).Take(&last).Error
	if err == nil {
		st.Last = &last
	} else if !errors.Is(err, gorm.ErrRecordNotFound) {
		return st, fmt.Errorf("read last delivery of %s: %w", channel, err)
	}
	return st, nil
}

// ChannelOverride holds settings of a channel changed at runtime through the
// API (PATCH /channels/{id}, enable, disable). They apply over config.yaml,
// which is never rewritten; a nil field means "as in config.yaml". The
// secret itself is kept sealed in the secret store; SecretOverride says the
// stored one (or none, when it was cleared) replaces config.yaml's.
type ChannelOverride struct {
	ChannelID      string `gorm:"primaryKey;size:100"`
	Enabled        *bool
	URL            *string
	Method         *string `gorm:"size:16"`
	Headers        *string
	SecretOverride bool
	UpdatedBy      string `gorm:"size:191"`
	UpdatedAt      time.Time
}

// GetChannelOverride returns the override of a channel (an empty one, not
// an error, when there is none).
func (s *Store) GetChannelOverride(ctx context.Context, channelID string) (*ChannelOverride, error) {
	var o ChannelOverride
	err := s.DB.WithContext(ctx).First(&o, "channel_id = ?", channelID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return &ChannelOverride{ChannelID: channelID}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read settings of channel %s: %w", channelID, err)
	}
	return &o, nil
}

// SaveChannelOverride stores the override of a channel.
func (s *Store) SaveChannelOverride(ctx context.Context, o *ChannelOverride) error {
	o.UpdatedAt = time.Now().UTC()
	if err := s.DB.WithContext(ctx).Save(o).Error; err != nil {
		return fmt.Errorf("save settings of channel %s: %w", o.ChannelID, err)
	}
	return nil
}
