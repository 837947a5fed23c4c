//go:build unix

package models

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

var (
	errJournalBusy        = errors.New("admission journal held by another process")
	errJournalUnsupported = errors.New("admission journal not supported here")
)

// lockJournal takes the journal's lock for this process (it goes with the
// process if it dies), or fails with errJournalBusy.
func lockJournal(path string) (io.Closer, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open admission journal lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errJournalBusy
		}
		return nil, fmt.Errorf("lock admission journal %s: %w", path, err)
	}
	return f, nil // closing releases the lock
}
