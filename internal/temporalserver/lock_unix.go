//go:build unix

package temporalserver

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockDataDir takes an exclusive lock on the database so that a second
// embedded server (in this or another process) cannot open it: two servers
// on one SQLite file would both claim the history shard and corrupt runs.
// The lock goes with the process if it dies.
func lockDataDir(dbPath string) (release func(), err error) {
	path := dbPath + ".lock"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("temporal database %s is in use by another embedded Temporal server; stop it or use another data directory", dbPath)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil // closing releases the lock
}
