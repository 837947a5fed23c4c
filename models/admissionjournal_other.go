//go:build !unix

package models

import (
	"errors"
	"io"
)

var (
	errJournalBusy        = errors.New("admission journal held by another process")
	errJournalUnsupported = errors.New("admission journal not supported here")
)

// lockJournal: without flock the journal is not used; admissions commit
// through SQLite.
func lockJournal(string) (io.Closer, error) { return nil, errJournalUnsupported }
