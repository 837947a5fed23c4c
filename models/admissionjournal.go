package models

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/agentryhq/agentry/models/sqlitewriter"
)

// admissionJournal lets a cost admission on SQLite skip a commit of its own.
//
// An admission must be durable before the provider is called (after a crash
// the ledger has a row for every call a provider saw), and its settlement
// before the reply is sent. Committed through SQLite, that is two commits
// per call, each a BEGIN, the WAL frames of every page the rows touched
// (the ledger row and its three indexes, the reservation row and its two,
// written at admission and again at settlement) and a COMMIT: at one
// connection about half of the gateway's CPU per chat request.
//
// Instead the writer decides the admission exactly as before (in memory,
// serially, against the counters it holds plus the reservations journaled
// here) and appends one line to this journal, an append-only file beside
// the database, with a single write per batch. A write to a file is as
// durable as SQLite's own commit with synchronous=NORMAL: it survives the
// process (SIGKILL), not the machine losing power. The call's ledger row is
// then written once, complete, by its settlement's batch: one INSERT, no
// reservation row, no reservation on the counters. An admission that is
// not settled within hold (a long stream, a slow provider) is written to
// the database as any admission was (pending row, reservation, reserved on
// the counters), so reports, the reaper and the crash sweep see it.
//
// After a crash the journal's admissions that were neither settled nor
// written are written as pending rows with their reservations when the
// store opens (recover): the state an admission committed through SQLite
// would have left, which the reaper then prices at its worst case.
//
// Each settled or written admission gets a done line, written with the
// next admissions' lines (or with other done lines once many wait); two
// files take turns, and the idle one is emptied when all of its admissions
// are done, so the journal stays small.
//
// Only the process holding the journal's lock uses it (one gateway owns a
// SQLite file; see docs/decisions.md); another process opening the same
// database admits through SQLite as before.
//
// Everything except reservedSnapshot and heldReservations runs under the
// group commit's writing lock (on the writer's goroutine, or a caller
// running its batch): the writer calls it through ledgerHook.
type admissionJournal struct {
	// syncEach fsyncs every append before the admissions in it are
	// acknowledged (storage.sqlite.durability: power).
	syncEach bool
	base     string // file name prefix: <db>-admissions
	lock     io.Closer
	files    [2]*os.File
	cur      int
	size     int64 // bytes written to files[cur]
	// fileLimit is journalFileLimit (tests lower it).
	fileLimit int64
	// outstanding counts the admissions of each file without a done line.
	outstanding [2]int
	// deferred are the admissions journaled and not yet settled or written
	// to the database, by admission id; queue holds them in journal order
	// (with resolved ones, skipped) for the hold.
	deferred map[string]*deferredAdmission
	byCall   map[string]*deferredAdmission // the newest of each call id
	queue    []*deferredAdmission
	hold     time.Duration
	now      func() time.Time
	retryAt  time.Time // after a failed write of due admissions

	// mu guards reserved for reservedSnapshot; the writer changes it only
	// under mu and reads it without.
	mu sync.Mutex
	// reserved is the sum of the deferred admissions' amounts per counter;
	// heldCount and heldMicros count those with a reservation.
	reserved   map[string]int64
	heldCount  int64
	heldMicros int64

	// The attempt at a batch in progress.
	added    []*deferredAdmission // journaled by this attempt
	resolved []*deferredAdmission // settled or written by this attempt's transaction
	delta    map[string]int64     // change of reserved by this attempt
	doneToDo []*deferredAdmission // resolved and committed, done line not yet written
	buf      bytes.Buffer         // this attempt's lines
	enc      *json.Encoder        // writes to buf
}

// deferredAdmission is one journaled admission: the pending ledger row as
// admitted and its reservation.
type deferredAdmission struct {
	id    string
	entry LedgerEntry
	// encoded is entry as JSON, encoded by the admitting request before
	// the writer decided (see appendAdmissionLine); nil: encode it here.
	encoded   []byte
	keys      []string // sorted
	amount    int64
	expiresAt time.Time
	at        time.Time // when it was journaled
	file      int
	job       int  // the batch job that journaled it
	resolving bool // settled or written by the current attempt
	done      bool // settled or written, committed
}

// journalLine is one line of the journal: an admission ("a") or the done
// mark of one ("d").
type journalLine struct {
	Kind      string       `json:"k"`
	ID        string       `json:"id"`
	Entry     *LedgerEntry `json:"e,omitempty"`
	Keys      []string     `json:"keys,omitempty"`
	Amount    int64        `json:"amt,omitempty"`
	ExpiresAt *time.Time   `json:"exp,omitempty"`
	// Decided are the entry's fields the writer decided, which Entry (as
	// the request encoded it before) may not have yet.
	Decided *decidedFields `json:"dec,omitempty"`
}

// decidedFields are the ledger entry's fields set by the admission's
// decision (the reservation, and the output allowance when clamped).
type decidedFields struct {
	ReservedMicros  int64 `json:"rsv"`
	MaxOutputTokens int64 `json:"mo"`
	Clamped         bool  `json:"cl"`
}

// Journal limits.
const (
	// journalHold is how long an admission may wait for its settlement
	// before it is written to the database like any admission.
	journalHold = time.Second
	// journalFileLimit is the size past which the writer turns to the
	// other file (once all of that file's admissions are done).
	journalFileLimit = 4 << 20
	// doneLinesAlone is how many done lines may wait for the next
	// admission's write before they are written on their own.
	doneLinesAlone = 512
)

// openAdmissionJournal opens the journal of the SQLite database at dbPath
// and returns the admissions the last process left unfinished, or a nil
// journal (and no error) when another process holds it.
func openAdmissionJournal(dbPath string) (*admissionJournal, []*deferredAdmission, error) {
	base := dbPath + "-admissions"
	lock, err := lockJournal(base + ".lock")
	if errors.Is(err, errJournalBusy) || errors.Is(err, errJournalUnsupported) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	j := &admissionJournal{base: base, lock: lock, deferred: map[string]*deferredAdmission{}, byCall: map[string]*deferredAdmission{}, fileLimit: journalFileLimit, hold: journalHold, now: time.Now,
		reserved: map[string]int64{}, delta: map[string]int64{}}
	j.enc = json.NewEncoder(&j.buf)
	var left []journalLine
	for i := range j.files {
		f, err := os.OpenFile(fmt.Sprintf("%s-%d", base, i), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			j.close()
			return nil, nil, fmt.Errorf("open admission journal: %w", err)
		}
		j.files[i] = f
		lines, err := readJournal(f)
		if err != nil {
			j.close()
			return nil, nil, err
		}
		left = append(left, lines...)
	}
	return j, unfinished(left), nil
}

// readJournal reads the lines of f. A last line cut short by a crash
// (no newline) was never acknowledged, so it is ignored.
func readJournal(f *os.File) ([]journalLine, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("read admission journal: %w", err)
	}
	var out []journalLine
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return out, nil // a partial last line (no newline) is dropped
		}
		if err != nil {
			return nil, fmt.Errorf("read admission journal %s: %w", f.Name(), err)
		}
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("admission journal %s has a damaged line (%w); move the file aside to start without it, "+
				"losing the ledger rows of the calls it holds", f.Name(), err)
		}
		out = append(out, l)
	}
}

// unfinished returns the admissions of lines without a done line.
func unfinished(lines []journalLine) []*deferredAdmission {
	done := map[string]bool{}
	for _, l := range lines {
		if l.Kind == "d" {
			done[l.ID] = true
		}
	}
	var out []*deferredAdmission
	for _, l := range lines {
		if l.Kind != "a" || done[l.ID] || l.Entry == nil {
			continue
		}
		d := &deferredAdmission{id: l.ID, entry: *l.Entry, keys: l.Keys, amount: l.Amount}
		if dec := l.Decided; dec != nil {
			d.entry.ReservedMicros, d.entry.MaxOutputTokens, d.entry.Clamped = dec.ReservedMicros, dec.MaxOutputTokens, dec.Clamped
		}
		if l.ExpiresAt != nil {
			d.expiresAt = *l.ExpiresAt
		}
		done[l.ID] = true // once, even if written twice
		out = append(out, d)
	}
	return out
}

// reset empties both files (after recovery, or at a clean close).
func (j *admissionJournal) reset() error {
	for _, f := range j.files {
		if err := f.Truncate(0); err != nil {
			return fmt.Errorf("empty admission journal: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("empty admission journal: %w", err)
		}
	}
	j.cur, j.size, j.outstanding = 0, 0, [2]int{}
	return nil
}

func (j *admissionJournal) close() {
	for _, f := range j.files {
		if f != nil {
			f.Close()
		}
	}
	if j.lock != nil {
		j.lock.Close()
	}
}

// begin starts an attempt at a batch.
func (j *admissionJournal) begin() {
	for _, d := range j.resolved {
		d.resolving = false
	}
	j.added, j.resolved = j.added[:0], j.resolved[:0]
	clear(j.delta)
}

// reservedFor is what the deferred admissions reserve on key, as this
// attempt sees it.
func (j *admissionJournal) reservedFor(key string) int64 {
	return j.reserved[key] + j.delta[key]
}

// admit journals an admission decided by the batch's job (its index in
// the batch, sqlitewriter.GroupCommit.Job).
func (j *admissionJournal) admit(d *deferredAdmission, job int) {
	d.job = job
	j.added = append(j.added, d)
	for _, k := range d.keys {
		j.delta[k] += d.amount
	}
}

// lookup returns the deferred admission id, or nil when it is not deferred
// (never journaled, or already written to the database).
func (j *admissionJournal) lookup(id string) *deferredAdmission {
	d := j.deferred[id]
	if d == nil || d.resolving {
		return nil
	}
	return d
}

// sameCall returns an admission of callID still journaled (committed or
// by this attempt), or nil.
func (j *admissionJournal) sameCall(callID string) *deferredAdmission {
	for _, d := range j.added {
		if d.entry.CallID == callID {
			return d
		}
	}
	if d := j.byCall[callID]; d != nil && !d.resolving {
		return d
	}
	return nil
}

// writeNow takes d out of the journal: it is written to the database by
// the current attempt's transaction (writeAdmission) instead.
func (j *admissionJournal) writeNow(d *deferredAdmission) {
	if i := slices.Index(j.added, d); i >= 0 {
		j.added = slices.Delete(j.added, i, i+1)
		for _, k := range d.keys {
			j.delta[k] -= d.amount
		}
		return
	}
	j.resolve(d)
}

// resolve marks d settled or written by this attempt's transaction.
func (j *admissionJournal) resolve(d *deferredAdmission) {
	d.resolving = true
	j.resolved = append(j.resolved, d)
	for _, k := range d.keys {
		j.delta[k] -= d.amount
	}
}

// due returns the deferred admissions held longer than hold (all of them
// when all is set).
func (j *admissionJournal) due(all bool) []*deferredAdmission {
	j.dropDoneHead()
	now := j.now()
	if !all && now.Before(j.retryAt) {
		return nil
	}
	cut := now.Add(-j.hold)
	var out []*deferredAdmission
	for _, d := range j.queue {
		if d.done {
			continue // settled out of order; dropped once it reaches the head
		}
		if !all && d.at.After(cut) {
			break
		}
		out = append(out, d)
	}
	return out
}

// dropDoneHead drops the settled or written admissions at the queue's head.
func (j *admissionJournal) dropDoneHead() {
	n := 0
	for n < len(j.queue) && j.queue[n].done {
		j.queue[n] = nil
		n++
	}
	j.queue = j.queue[n:]
	if len(j.queue) == 0 {
		j.queue = nil // let the array go
	}
}

// backOff notes that writing the due admissions failed (a full disk): the
// writer tries again after retryAfterFailure, not at every batch.
func (j *admissionJournal) backOff() {
	j.retryAt = j.now().Add(retryAfterFailure)
}

const retryAfterFailure = time.Second

// nextDue is when the oldest deferred admission is due (false: none).
func (j *admissionJournal) nextDue() (time.Time, bool) {
	j.dropDoneHead()
	if len(j.queue) == 0 {
		return time.Time{}, false
	}
	at := j.queue[0].at.Add(j.hold)
	if at.Before(j.retryAt) {
		at = j.retryAt
	}
	return at, true
}

// committed finishes an attempt whose transaction committed (or that had
// none): its resolutions take effect, then its lines (the new admissions
// and the done lines owed) are written. An error of that write fails the
// attempt's admissions (reported by failedJobs); the done lines are kept
// for the next write.
func (j *admissionJournal) committed() error {
	j.mu.Lock()
	for _, d := range j.resolved {
		d.resolving, d.done = false, true
		delete(j.deferred, d.id)
		if j.byCall[d.entry.CallID] == d {
			delete(j.byCall, d.entry.CallID)
		}
		for _, k := range d.keys {
			if j.reserved[k] -= d.amount; j.reserved[k] == 0 {
				delete(j.reserved, k)
			}
		}
		if len(d.keys) > 0 {
			j.heldCount, j.heldMicros = j.heldCount-1, j.heldMicros-d.amount
		}
		j.doneToDo = append(j.doneToDo, d)
	}
	j.mu.Unlock()
	j.resolved = j.resolved[:0]
	if len(j.added) == 0 && len(j.doneToDo) < doneLinesAlone {
		// Done lines alone wait for the next admission's write: a chat
		// request's exchange then costs no journal write of its own. A
		// done line only spares recovery a lookup in the database (an
		// admission without one is looked up there, see recoverJournal).
		return nil
	}
	if err := j.rotate(); err != nil {
		return err
	}
	j.buf.Reset()
	for _, d := range j.added {
		line, err := appendAdmissionLine(j.buf.AvailableBuffer(), d)
		if err != nil {
			return fmt.Errorf("admission journal: %w", err)
		}
		j.buf.Write(line)
	}
	for _, d := range j.doneToDo {
		if err := j.enc.Encode(journalLine{Kind: "d", ID: d.id}); err != nil {
			return fmt.Errorf("admission journal: %w", err)
		}
	}
	n, err := j.files[j.cur].Write(j.buf.Bytes())
	j.size += int64(n)
	if err == nil && j.syncEach {
		err = sqlitewriter.SyncForAck(j.files[j.cur])
	}
	if err != nil {
		if n > 0 {
			// Cut the partial lines off: an admission whose caller is told
			// it failed must not come back at recovery.
			_ = j.files[j.cur].Truncate(j.size - int64(n))
			_, _ = j.files[j.cur].Seek(j.size-int64(n), io.SeekStart)
			j.size -= int64(n)
		}
		return fmt.Errorf("write admission journal: %w", err)
	}
	for _, d := range j.doneToDo {
		j.outstanding[d.file]--
	}
	j.doneToDo = j.doneToDo[:0]
	now := j.now()
	j.mu.Lock()
	for _, d := range j.added {
		d.file, d.at = j.cur, now
		j.deferred[d.id] = d
		j.byCall[d.entry.CallID] = d
		j.queue = append(j.queue, d)
		for _, k := range d.keys {
			j.reserved[k] += d.amount
		}
		if len(d.keys) > 0 {
			j.heldCount, j.heldMicros = j.heldCount+1, j.heldMicros+d.amount
		}
	}
	j.mu.Unlock()
	j.outstanding[j.cur] += len(j.added)
	j.added = j.added[:0]
	clear(j.delta)
	return nil
}

// rotate turns to the other file when the current one is past its limit
// and every admission of the other one is done.
func (j *admissionJournal) rotate() error {
	other := 1 - j.cur
	if j.size < j.fileLimit || j.outstanding[other] > 0 {
		return nil
	}
	f := j.files[other]
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("empty admission journal: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("empty admission journal: %w", err)
	}
	j.cur, j.size = other, 0
	return nil
}

// failedJobs returns the jobs whose admissions the last committed() could
// not write, and forgets those admissions.
func (j *admissionJournal) failedJobs() []int {
	var out []int
	for _, d := range j.added {
		out = append(out, d.job)
	}
	j.added = j.added[:0]
	clear(j.delta)
	return out
}

// reservedSnapshot adds the deferred admissions' reservations to counters
// read from the database (any goroutine).
func (j *admissionJournal) reservedSnapshot(out map[string]CounterValue) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for k, v := range out {
		v.ReservedMicros += j.reserved[k]
		out[k] = v
	}
}

// heldReservations is how many journaled admissions hold a reservation,
// and how much (any goroutine).
func (j *admissionJournal) heldReservations() (count, micros int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.heldCount, j.heldMicros
}
