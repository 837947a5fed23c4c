package models

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Database unavailable: PostgreSQL stopped, restarting, failed over or cut
// off by the network. Unlike a full disk it usually mends itself within
// seconds, and the gateway's pool reconnects on its own: the API answers
// 503 database_unavailable with a short Retry-After (never a bare 500 that
// reads like a bug), /health/live turns degraded through its write probe,
// and requests succeed again as soon as the database answers, with no
// restart (decisions.md, "PostgreSQL outage").

// IsDatabaseUnavailable reports whether err says the database could not be
// reached or dropped the connection, as opposed to refusing a statement: a
// failed connect, a connection closed or reset mid-query, or PostgreSQL's
// connection_exception class (08) and shutdown states (57P01-57P03).
func IsDatabaseUnavailable(err error) bool {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// A caller that gave up is not a database that went away.
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var oe *net.OpError
	switch {
	case errors.As(err, &oe),
		errors.Is(err, driver.ErrBadConn), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx says a connection it had already lost is closed, in words only.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "failed to connect to")
}

// ErrDatabaseUnavailable is what callers see of such an error: a fixed
// text, so no address or SQL reaches an API answer.
var ErrDatabaseUnavailable = errors.New("the gateway's database is unavailable; try again shortly")
