package sqlitewriter

// What tests (models' included) use to steer the writer.

// Hold keeps the writer, and callers that would run their own batches,
// from taking queued jobs until release is called: a test queues several
// jobs so that one drain takes them together.
func (g *GroupCommit) Hold() (release func()) {
	g.writing.Lock()
	return g.writing.Unlock
}

// Queued is how many jobs wait in the queue.
func (g *GroupCommit) Queued() int { return len(g.jobs) }
