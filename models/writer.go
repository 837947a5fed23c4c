package models

import "github.com/agentryhq/agentry/models/sqlitewriter"

// The SQLite write engine (Store.Group) is package sqlitewriter; the names
// its callers outside models know stay here.

// ErrOverloaded is returned when SQLite's writer's queue is full (see
// sqlitewriter.ErrOverloaded): the API answers 503 with Retry-After.
var ErrOverloaded = sqlitewriter.ErrOverloaded

const (
	// DefaultGroupQueue is Options.WriteQueue's default.
	DefaultGroupQueue = sqlitewriter.DefaultGroupQueue
	// DefaultLinger is Options.CommitLinger's default.
	DefaultLinger = sqlitewriter.DefaultLinger
)
