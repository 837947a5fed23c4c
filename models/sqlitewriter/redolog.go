package sqlitewriter

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math"
	"os"
	"time"
)

// RedoLog lets the group commit acknowledge a batch before SQLite commits
// it (see GroupCommit's lingering transaction).
//
// A SQLite commit costs about the same whatever it holds: BEGIN IMMEDIATE's
// locks, and at COMMIT a WAL frame for every page the transaction touched.
// At one connection a chat request paid a whole commit (about 0.15 ms of the
// 0.3 ms its writes cost) for a handful of rows, and consecutive requests
// wrote the same hot pages (the ends of the ledger, run and message B-trees,
// the counters) again and again. Instead the writer keeps its transaction
// open across batches for up to lingerFor and commits once for all of them.
// Each batch's statements, as run, are appended to this log with one write
// before its callers are answered: a write to a file survives the process
// (SIGKILL) exactly as a commit with synchronous=NORMAL does (neither
// survives a power cut before the next checkpoint; see openSQLite).
//
// Each record is one batch: a sequence number and the batch's statements
// with their arguments as the driver received them. The lingering
// transaction's COMMIT also sets redo_applied.seq to its last batch's
// number. When the store opens, the records past that number (the batches a
// crash cut off before their commit) run again, in order, in one
// transaction: the statements are deterministic given their arguments
// (times and ids are arguments, not SQL functions), so they rebuild exactly
// the rows the dead process had acknowledged. In process, a batch that
// fails after others were acknowledged in the same transaction rolls all
// of them back; the next transaction runs the acknowledged ones again from
// pending first (see GroupCommit.begin).
//
// Only the process holding the admission journal's lock uses it (one
// gateway owns a SQLite file).
type RedoLog struct {
	// SyncEach fsyncs every record before its batch is acknowledged
	// (storage.sqlite.durability: power).
	SyncEach bool
	f        *os.File
	size     int64
	// seq is the number of the last record written; committed the
	// number stored by the last commit.
	seq, committed uint64
	// cur are the statements of the batch being run (one attempt).
	cur []byte
	// pending are the statements of the batches acknowledged and not yet
	// committed, in order, for running them again after a rollback.
	pending []byte
	// replaying turns recording off while pending runs again.
	replaying bool
	// recordBuf is reused for the framed record.
	recordBuf []byte
}

// redoFileLimit is the size past which a commit empties the log (every
// record in it is then committed).
const redoFileLimit = 1 << 20

// createRedoTableSQL holds the number of the last batch committed.
const (
	createRedoTableSQL = `CREATE TABLE IF NOT EXISTS redo_applied (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL)`
	seedRedoSQL        = `INSERT OR IGNORE INTO redo_applied (id, seq) VALUES (1, 0)`
	readRedoSQL        = `SELECT seq FROM redo_applied WHERE id = 1`
	SetRedoSQL         = `UPDATE redo_applied SET seq = ? WHERE id = 1`
)

// OpenRedoLog opens the redo log of the SQLite database at dbPath (the
// caller holds the journal's lock), runs the records the last process left
// uncommitted, and empties it.
func OpenRedoLog(ctx context.Context, db *sql.DB, dbPath string, log *slog.Logger) (*RedoLog, error) {
	f, err := os.OpenFile(dbPath+"-redo", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open redo log: %w", err)
	}
	r := &RedoLog{f: f}
	ran, err := r.recover(ctx, db)
	if err != nil {
		f.Close()
		return nil, err
	}
	if ran > 0 {
		log.Info("ran again the database writes a crash cut off before their commit (their replies had been sent)", "batches", ran)
	}
	return r, nil
}

// recover runs the records past the database's redo_applied.seq in one
// transaction, empties the file and returns how many it ran.
func (r *RedoLog) recover(ctx context.Context, db *sql.DB) (ran int, _ error) {
	records, err := readRedoRecords(r.f)
	if err != nil {
		return 0, err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("redo log: begin: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{createRedoTableSQL, seedRedoSQL} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return 0, fmt.Errorf("redo log: %w", err)
		}
	}
	var applied uint64
	if err := tx.QueryRowContext(ctx, readRedoSQL).Scan(&applied); err != nil {
		return 0, fmt.Errorf("redo log: %w", err)
	}
	last := applied
	for _, rec := range records {
		if rec.seq <= applied {
			continue
		}
		err := eachStatement(rec.body, func(query string, args []any) error {
			_, err := tx.ExecContext(ctx, query, args...)
			return err
		})
		if err != nil {
			return 0, fmt.Errorf("redo log: batch %d: %w; move %s aside to start without the batches it holds", rec.seq, err, r.f.Name())
		}
		last = rec.seq
		ran++
	}
	if last != applied {
		if _, err := tx.ExecContext(ctx, SetRedoSQL, int64(last)); err != nil {
			return 0, fmt.Errorf("redo log: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("redo log: commit: %w", err)
	}
	r.seq, r.committed = last, last
	return ran, r.Truncate()
}

func (r *RedoLog) Truncate() error {
	if err := r.f.Truncate(0); err != nil {
		return fmt.Errorf("empty redo log: %w", err)
	}
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("empty redo log: %w", err)
	}
	r.size = 0
	return nil
}

func (r *RedoLog) Close() { r.f.Close() }

// startBatch forgets the statements of a previous attempt.
func (r *RedoLog) StartBatch() { r.cur = r.cur[:0] }

// add records one statement the batch ran.
func (r *RedoLog) Add(query string, args []driver.NamedValue) error {
	if r.replaying {
		return nil
	}
	b := binary.AppendUvarint(r.cur, uint64(len(query)))
	b = append(b, query...)
	b = binary.AppendUvarint(b, uint64(len(args)))
	for _, a := range args {
		var err error
		if b, err = appendRedoValue(b, a.Value); err != nil {
			return err
		}
	}
	r.cur = b
	return nil
}

// write appends the current batch as a record (one write) and keeps its
// statements in pending. Nothing is written for a batch without
// statements.
func (r *RedoLog) Write() error {
	if len(r.cur) == 0 {
		return nil
	}
	seq := r.seq + 1
	// length (of seq and body), seq, body, CRC-32 of seq and body.
	b := binary.LittleEndian.AppendUint32(r.recordBuf[:0], uint32(8+len(r.cur)))
	b = binary.LittleEndian.AppendUint64(b, seq)
	b = append(b, r.cur...)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(b[4:]))
	r.recordBuf = b
	if _, err := r.f.Write(b); err != nil {
		// A record cut short is ignored when read (its length or CRC);
		// start the next one where this one started.
		_, _ = r.f.Seek(r.size, io.SeekStart)
		return fmt.Errorf("write redo log: %w", err)
	}
	if r.SyncEach {
		// Durability power: the record is on the disk before the batch is
		// acknowledged; one fsync covers every job of the batch.
		if err := SyncForAck(r.f); err != nil {
			_ = r.f.Truncate(r.size)
			_, _ = r.f.Seek(r.size, io.SeekStart)
			return fmt.Errorf("sync redo log: %w", err)
		}
	}
	r.size += int64(len(b))
	r.seq = seq
	r.pending = append(r.pending, r.cur...)
	r.cur = r.cur[:0]
	return nil
}

// recorded reports whether batches are acknowledged and not committed.
func (r *RedoLog) Recorded() bool { return r.seq != r.committed }

// committedUpTo notes that the transaction holding every record up to seq
// committed, and empties the file once it is large.
func (r *RedoLog) CommittedUpTo(seq uint64) {
	r.committed = seq
	r.pending = r.pending[:0]
	if r.size > redoFileLimit && r.seq == seq {
		_ = r.Truncate() // on failure the file only grows; its records are all committed
	}
}

// runPending runs the acknowledged batches again in tx, after the
// transaction that held them was rolled back.
func (r *RedoLog) RunPending(ctx context.Context, tx *sql.Tx) error {
	if len(r.pending) == 0 {
		return nil
	}
	r.replaying = true
	defer func() { r.replaying = false }()
	return eachStatement(r.pending, func(query string, args []any) error {
		_, err := tx.ExecContext(ctx, query, args...)
		return err
	})
}

// Argument encoding: a tag byte, then the value. These are the types
// database/sql hands a driver (driver.Value).
const (
	redoNil byte = iota
	redoInt
	redoFloat
	redoBool
	redoBytes
	redoString
	redoTime
)

func appendRedoValue(b []byte, v driver.Value) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(b, redoNil), nil
	case int64:
		return binary.AppendVarint(append(b, redoInt), x), nil
	case float64:
		return binary.LittleEndian.AppendUint64(append(b, redoFloat), math.Float64bits(x)), nil
	case bool:
		if x {
			return append(b, redoBool, 1), nil
		}
		return append(b, redoBool, 0), nil
	case []byte:
		b = binary.AppendUvarint(append(b, redoBytes), uint64(len(x)))
		return append(b, x...), nil
	case string:
		b = binary.AppendUvarint(append(b, redoString), uint64(len(x)))
		return append(b, x...), nil
	case time.Time:
		// MarshalBinary keeps the instant and the zone offset, which the
		// driver formats into the stored text.
		t, err := x.MarshalBinary()
		if err != nil {
			return nil, fmt.Errorf("redo log: %w", err)
		}
		b = binary.AppendUvarint(append(b, redoTime), uint64(len(t)))
		return append(b, t...), nil
	}
	return nil, fmt.Errorf("redo log: cannot record an argument of type %T", v)
}

var errRedoDamaged = errors.New("redo log: damaged statement")

// eachStatement decodes the statements of body and calls fn with each.
func eachStatement(body []byte, fn func(query string, args []any) error) error {
	var args []any
	for len(body) > 0 {
		n, k := binary.Uvarint(body)
		if k <= 0 || uint64(len(body)-k) < n {
			return errRedoDamaged
		}
		query := string(body[k : k+int(n)])
		body = body[k+int(n):]
		count, k := binary.Uvarint(body)
		if k <= 0 {
			return errRedoDamaged
		}
		body = body[k:]
		args = args[:0]
		for range count {
			var v any
			var err error
			if v, body, err = readRedoValue(body); err != nil {
				return err
			}
			args = append(args, v)
		}
		if err := fn(query, args); err != nil {
			return err
		}
	}
	return nil
}

func readRedoValue(b []byte) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, errRedoDamaged
	}
	tag, b := b[0], b[1:]
	switch tag {
	case redoNil:
		return nil, b, nil
	case redoInt:
		v, k := binary.Varint(b)
		if k <= 0 {
			return nil, nil, errRedoDamaged
		}
		return v, b[k:], nil
	case redoFloat:
		if len(b) < 8 {
			return nil, nil, errRedoDamaged
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), b[8:], nil
	case redoBool:
		if len(b) < 1 {
			return nil, nil, errRedoDamaged
		}
		return b[0] == 1, b[1:], nil
	case redoBytes, redoString, redoTime:
		n, k := binary.Uvarint(b)
		if k <= 0 || uint64(len(b)-k) < n {
			return nil, nil, errRedoDamaged
		}
		raw, rest := b[k:k+int(n)], b[k+int(n):]
		switch tag {
		case redoBytes:
			return append([]byte(nil), raw...), rest, nil
		case redoString:
			return string(raw), rest, nil
		}
		var t time.Time
		if err := t.UnmarshalBinary(raw); err != nil {
			return nil, nil, errRedoDamaged
		}
		return t, rest, nil
	}
	return nil, nil, errRedoDamaged
}

type redoRecord struct {
	seq  uint64
	body []byte
}

// readRedoRecords reads the records of f. The first one cut short or
// damaged (a crash in the middle of a write; its batch was never
// acknowledged) ends the log.
func readRedoRecords(f *os.File) ([]redoRecord, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read redo log: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read redo log: %w", err)
	}
	var out []redoRecord
	for len(data) >= 4 {
		n := int(binary.LittleEndian.Uint32(data))
		if n < 8 || len(data) < 4+n+4 {
			break
		}
		payload := data[4 : 4+n]
		if crc32.ChecksumIEEE(payload) != binary.LittleEndian.Uint32(data[4+n:]) {
			break
		}
		out = append(out, redoRecord{seq: binary.LittleEndian.Uint64(payload), body: payload[8:]})
		data = data[4+n+4:]
	}
	return out, nil
}

// Seq is the number of the last record written (the batch a commit now
// marks as applied with SetRedoSQL).
func (r *RedoLog) Seq() uint64 { return r.seq }

// Buffered is how many bytes of statements the log holds for the batches
// not committed yet (pending and the current batch's).
func (r *RedoLog) Buffered() int { return len(r.pending) + len(r.cur) }

// SetReplaying turns recording off (true) while the writer runs statements
// that are no batch's (the commit's SetRedoSQL), and on again.
func (r *RedoLog) SetReplaying(on bool) { r.replaying = on }
