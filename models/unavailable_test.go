package models

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestIsDatabaseUnavailable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("record not found"), false},
		{&pgconn.PgError{Code: "23505"}, false},                          // unique violation: the database answered
		{&pgconn.PgError{Code: "57014"}, false},                          // statement timeout: answered too
		{fmt.Errorf("create task: %w", context.DeadlineExceeded), false}, // the caller gave up
		{context.Canceled, false},
		{&pgconn.PgError{Code: "08006"}, true}, // connection_failure
		{&pgconn.PgError{Code: "57P01"}, true}, // admin_shutdown
		{&pgconn.PgError{Code: "57P03"}, true}, // cannot_connect_now (starting up)
		{fmt.Errorf("list: %w", refused), true},
		{fmt.Errorf("query: %w", driver.ErrBadConn), true},
		{fmt.Errorf("failed to receive message: %w", io.ErrUnexpectedEOF), true},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{errors.New("conn closed"), true},
	} {
		if got := IsDatabaseUnavailable(tc.err); got != tc.want {
			t.Errorf("IsDatabaseUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
