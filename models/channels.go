package models

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The messaging channels' tables (internal/channels): receive positions,
// settings changed through the API, and one row per inbound message.

// ChannelCursor is an adapter's stored receive position: Telegram's next
// getUpdates offset, Discord's last accepted message id per chat.
type ChannelCursor struct {
	Key       string `gorm:"primaryKey;size:191"`
	Value     string `gorm:"size:191;not null"`
	UpdatedAt time.Time
}

// ChannelSetting holds a messaging channel's settings changed through the
// API (PATCH /channels/{id}): Settings is a JSON object of the changed
// keys, applied over config.yaml (never rewritten). Credentials are not in
// it: they are sealed in the secret store, and SecretKeys lists which ones
// were set there (comma-separated), so a cleared one stays cleared.
type ChannelSetting struct {
	ChannelID  string `gorm:"primaryKey;size:100"`
	Settings   string `gorm:"type:text;not null"`
	SecretKeys string `gorm:"size:191"`
	UpdatedBy  string `gorm:"size:191"`
	UpdatedAt  time.Time
}

// Channel message states.
const (
	ChannelMessageReceived = "received"
	ChannelMessageAnswered = "answered"
	ChannelMessageFailed   = "failed"
)

// ChannelMessage is one inbound message a channel accepted, keyed by the
// platform's identity, and what became of it: the console's "last
// message", and the record of the reply's platform message ids.
type ChannelMessage struct {
	ChannelID  string    `gorm:"primaryKey;size:100"`
	MessageID  string    `gorm:"primaryKey;size:191"`
	ChatID     string    `gorm:"size:191;not null"`
	ThreadID   string    `gorm:"size:191"`
	UserID     string    `gorm:"size:191"`
	Status     string    `gorm:"size:16;not null"`
	RunID      string    `gorm:"size:64"`
	ReplyIDs   string    `gorm:"type:text"`
	Error      string    `gorm:"type:text"`
	ReceivedAt time.Time `gorm:"index"`
	AnsweredAt *time.Time
}

// ChannelMessageStats summarises a channel's inbound messages.
type ChannelMessageStats struct {
	Received int64
	Answered int64
	Failed   int64
	Last     *ChannelMessage
}

// Cursor returns the stored value of key ("" when none).
func (s *Store) Cursor(ctx context.Context, key string) (string, error) {
	var c ChannelCursor
	err := s.DB.WithContext(ctx).Take(&c, "key = ?", key).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read channel cursor %s: %w", key, err)
	}
	return c.Value, nil
}

// SetCursor stores value under key.
func (s *Store) SetCursor(ctx context.Context, key, value string) error {
	c := ChannelCursor{Key: key, Value: value, UpdatedAt: time.Now().UTC()}
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "key"}},
		DoUpdates: clause.AssignmentColumns([]string{"value", "updated_at"})}).Create(&c).Error
	if err != nil {
		return fmt.Errorf("store channel cursor %s: %w", key, err)
	}
	return nil
}

// CursorKeys lists the stored keys that start with prefix.
func (s *Store) CursorKeys(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	err := s.DB.WithContext(ctx).Model(&ChannelCursor{}).Where("substr(key, 1, ?) = ?", len(prefix), prefix).Order("key").Pluck("key", &keys).Error
	if err != nil {
		return nil, fmt.Errorf("list channel cursors %s*: %w", prefix, err)
	}
	return keys, nil
}

// GetChannelSetting returns the API's settings of a channel (an empty row
// when there are none).
func (s *Store) GetChannelSetting(ctx context.Context, channelID string) (*ChannelSetting, error) {
	var c ChannelSetting
	err := s.DB.WithContext(ctx).Take(&c, "channel_id = ?", channelID).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return &ChannelSetting{ChannelID: channelID, Settings: "{}"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read settings of channel %s: %w", channelID, err)
	}
	return &c, nil
}

// SaveChannelSetting stores the API's settings of a channel.
func (s *Store) SaveChannelSetting(ctx context.Context, c *ChannelSetting) error {
	c.UpdatedAt = time.Now().UTC()
	if err := s.DB.WithContext(ctx).Save(c).Error; err != nil {
		return fmt.Errorf("save settings of channel %s: %w", c.ChannelID, err)
	}
	return nil
}

// RecordChannelMessage inserts or updates a message's row (the fields of m
// that are set replace the stored ones).
func (s *Store) RecordChannelMessage(ctx context.Context, m *ChannelMessage) error {
	cols := []string{"status", "error"}
	if m.RunID != "" {
		cols = append(cols, "run_id")
	}
	if m.ReplyIDs != "" {
		cols = append(cols, "reply_ids")
	}
	if m.AnsweredAt != nil {
		cols = append(cols, "answered_at")
	}
	err := s.DB.WithContext(ctx).Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "channel_id"}, {Name: "message_id"}},
		DoUpdates: clause.AssignmentColumns(cols)}).Create(m).Error
	if err != nil {
		return fmt.Errorf("record message %s of channel %s: %w", m.MessageID, m.ChannelID, err)
	}
	return nil
}

// ChannelMessageStats counts a channel's messages by state, with the last.
func (s *Store) ChannelMessageStats(ctx context.Context, channelID string) (ChannelMessageStats, error) {
	var st ChannelMessageStats
	var rows []struct {
		Status string
		N      int64
	}
	if err := s.DB.WithContext(ctx).Model(&ChannelMessage{}).Select("status, COUNT(*) AS n").Where("channel_id = ?", channelID).
		Group("status").Scan(&rows).Error; err != nil {
		return st, fmt.Errorf("count messages of channel %s: %w", channelID, err)
	}
	for _, r := range rows {
		st.Received += r.N
		switch r.Status {
		case ChannelMessageAnswered:
			st.Answered = r.N
		case ChannelMessageFailed:
			st.Failed = r.N
		}
	}
	var last ChannelMessage
	err := s.DB.WithContext(ctx).Where("channel_id = ?", channelID).Order("received_at DESC").Limit(1).Take(&last).Error
	if err == nil {
		st.Last = &last
	} else if !errors.Is(err, gorm.ErrRecordNotFound) {
		return st, fmt.Errorf("read last message of channel %s: %w", channelID, err)
	}
	return st, nil
}

// ListChannelMessages returns a channel's newest messages first.
func (s *Store) ListChannelMessages(ctx context.Context, channelID string, limit int) ([]ChannelMessage, error) {
	var out []ChannelMessage
	if err := s.DB.WithContext(ctx).Where("channel_id = ?", channelID).Order("received_at DESC").Limit(limit).Find(&out).Error; err != nil {
		return nil, fmt.Errorf("list messages of channel %s: %w", channelID, err)
	}
	return out, nil
}
