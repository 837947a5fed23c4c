package sqlitewriter

import (
	"os"
	"sync/atomic"
)

// ackSyncs counts the fsyncs made so that an acknowledgement survives a
// power cut (storage.sqlite.durability: power).
var ackSyncs atomic.Int64

// SyncForAck fsyncs f before what was appended to it is acknowledged: the
// redo log's record of a batch, the admission journal's lines. One call
// covers a whole batch, so the cost is one fsync per group commit, not
// per request.
func SyncForAck(f *os.File) error {
	ackSyncs.Add(1)
	return f.Sync()
}

// AckSyncs is how many such fsyncs this process has made (tests, and the
// figure behind docs/benchmarks.md's durability comparison).
func AckSyncs() int64 { return ackSyncs.Load() }
