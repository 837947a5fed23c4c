package sqlitewriter

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
)

// PreparedStmt is a statement prepared on the store's pool the first time
// it is needed; database/sql prepares it again on each connection that
// runs it. A failed prepare is tried again by the next caller. Its zero
// value is ready.
type PreparedStmt struct {
	st atomic.Pointer[sql.Stmt]
	mu sync.Mutex // held while preparing
}

// Pool is what holds the store's connections (a *gorm.DB).
type Pool interface {
	DB() (*sql.DB, error)
}

// Get returns query prepared on db's pool, preparing it the first time.
func (p *PreparedStmt) Get(ctx context.Context, db Pool, query string) (*sql.Stmt, error) {
	if st := p.st.Load(); st != nil {
		return st, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.st.Load(); st != nil {
		return st, nil
	}
	sqlDB, err := db.DB()
	if err != nil {
		return nil, fmt.Errorf("prepare statement: %w", err)
	}
	st, err := sqlDB.PrepareContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare statement: %w", err)
	}
	p.st.Store(st)
	return st, nil
}
