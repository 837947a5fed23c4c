package models

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"gorm.io/gorm"
)

// preparedStmt is a statement prepared on the store's pool the first time
// it is needed; database/sql prepares it again on each connection that
// runs it. A failed prepare is tried again by the next caller.
type preparedStmt struct {
	st atomic.Pointer[sql.Stmt]
	mu sync.Mutex // held while preparing
}

func (p *preparedStmt) get(ctx context.Context, db *gorm.DB, query string) (*sql.Stmt, error) {
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
