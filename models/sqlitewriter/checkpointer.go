package sqlitewriter

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Checkpointer copies SQLite's write-ahead log back into the database file
// from its own connection, so that the writers mostly do not.
//
// By default SQLite checkpoints inside the commit that takes the WAL past
// 1000 pages: that commit copies every page of the log into the database
// and syncs both files (synchronous=NORMAL syncs at checkpoints, not at
// commits) before it returns. On the chat path the committing connection
// is the group-commit writer, which every request waits for, and under
// load a checkpoint came every few dozen batches, so every request paid
// for the copies and the fsyncs. Here this goroutine runs a PASSIVE
// checkpoint every checkpointEvery on a connection of its own: PASSIVE
// takes no lock a writer or reader waits for, so the writer goes on
// committing while the pages are copied and synced, and a page rewritten
// by many batches is copied once per checkpoint.
//
// A checkpoint beside a writer that never pauses never completes, though:
// frames are appended while it copies, and SQLite writes the WAL from its
// beginning again only after a complete checkpoint. With automatic
// checkpoints off, a 2-minute soak grew the WAL to 2.4 GB. So commits still
// checkpoint, past defaultWALPages (8192 pages, 32 MiB) instead of 1000:
// such a commit finds all but the last checkpointEvery's frames copied
// already, copies the rest and completes, and the next commit starts the
// WAL again. The writer thus checkpoints about eight times less often, and
// each time copies a fraction of the log.
//
// Durability is unchanged: a commit is in the WAL either way; a checkpoint
// only moves it.
type Checkpointer struct {
	db   *sql.DB
	log  *slog.Logger
	stop chan struct{}
	done chan struct{}
	once sync.Once
	// copied counts the WAL frames copied into the database file (tests).
	copied atomic.Int64
}

// checkpointEvery is the pause between checkpoints: short enough that the
// WAL stays small (a few MiB under load), long enough that a hot page is
// copied once for many commits.
const checkpointEvery = 200 * time.Millisecond

// StartCheckpointer opens the checkpoint connection on dsn and starts the
// loop.
func StartCheckpointer(dsn string, log *slog.Logger) (*Checkpointer, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open database: SQLite checkpoint connection: %w", err)
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	c := &Checkpointer{db: db, log: log, stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *Checkpointer) run() {
	defer close(c.done)
	t := time.NewTicker(checkpointEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		err := c.Checkpoint(context.Background(), "PASSIVE")
		// Say it once when checkpoints start failing and once when they
		// recover, not five times a second.
		switch {
		case err != nil && !failing:
			c.log.Warn("SQLite checkpoint failed; the write-ahead log grows until one succeeds", "err", err)
		case err == nil && failing:
			c.log.Info("SQLite checkpoints work again")
		}
		failing = err != nil
	}
}

// checkpoint runs one checkpoint of the given mode.
func (c *Checkpointer) Checkpoint(ctx context.Context, mode string) error {
	var busy, logFrames, copied int
	err := c.db.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &logFrames, &copied)
	if err != nil {
		return fmt.Errorf("wal_checkpoint(%s): %w", mode, err)
	}
	c.copied.Add(int64(copied))
	return nil
}

// Close stops the loop and closes its connection.
func (c *Checkpointer) Close() {
	c.once.Do(func() {
		close(c.stop)
		<-c.done
		_ = c.db.Close()
	})
}

// Copied is how many WAL frames the checkpointer copied into the database
// file so far (tests).
func (c *Checkpointer) Copied() int64 { return c.copied.Load() }
