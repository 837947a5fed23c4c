package models

import (
	"context"
	"errors"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// MCPServer is one MCP server registered through PUT /mcp/own/{id}. Header
// and env values are sealed by internal/secrets before they reach this
// table (SealedSecrets); the rest is plain.
type MCPServer struct {
	ID        string `gorm:"primaryKey;size:64"`
	Transport string `gorm:"size:16"`
	URL       string `gorm:"size:2048"`
	Command   string `gorm:"size:2048"`
	// Args is the JSON array of arguments.
	Args string `gorm:"type:text"`
	// KeyID, Nonce and Sealed hold the sealed JSON {"headers":..,"env":..}.
	KeyID     string `gorm:"size:32"`
	Nonce     []byte
	Sealed    []byte
	CreatedAt time.Time
	UpdatedAt time.Time
}

// PutMCPServer creates or replaces a registration and reports whether it
// was new.
func (s *Store) PutMCPServer(ctx context.Context, m *MCPServer) (created bool, err error) {
	err = s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&MCPServer{}).Where("id = ?", m.ID).Count(&n).Error; err != nil {
			return err
		}
		created = n == 0
		now := time.Now().UTC()
		m.CreatedAt, m.UpdatedAt = now, now
		return tx.Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "id"}},
			DoUpdates: clause.Assignments(map[string]any{"transport": m.Transport, "url": m.URL, "command": m.Command,
				"args": m.Args, "key_id": m.KeyID, "nonce": m.Nonce, "sealed": m.Sealed, "updated_at": now}),
		}).Create(m).Error
	})
	return created, err
}

// ListMCPServers returns every registration, by id.
func (s *Store) ListMCPServers(ctx context.Context) ([]MCPServer, error) {
	var out []MCPServer
	err := s.DB.WithContext(ctx).Order("id").Find(&out).Error
	return out, err
}

// DeleteMCPServer removes a registration, or returns ErrNotFound.
func (s *Store) DeleteMCPServer(ctx context.Context, id string) error {
	res := s.DB.WithContext(ctx).Delete(&MCPServer{}, "id = ?", id)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return ErrNotFound
	}
	return nil
}

// GetMCPServer returns one registration, or ErrNotFound.
func (s *Store) GetMCPServer(ctx context.Context, id string) (*MCPServer, error) {
	var m MCPServer
	err := s.DB.WithContext(ctx).First(&m, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	return &m, err
}
