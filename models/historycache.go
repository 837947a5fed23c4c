package models

import (
	"container/list"
	"hash/maphash"
	"sync"
	"unsafe"
)

// historyCache keeps the newest messages of recently used sessions in
// memory, written through by SaveExchange, so a chat turn does not read its
// history from the database (RecentMessages was about a quarter of the chat
// path's CPU profile on SQLite, most of it for sessions with no history at
// all).
//
// It is only correct while this process writes every message of the
// sessions it caches: SaveExchange is the only writer of chat_messages, and
// on SQLite one gateway process owns the file (see Store.Group). The store
// enables it on SQLite only; PostgreSQL serves many gateways.
//
// An entry holds the newest min(total, keep) messages of its session, oldest
// first, so it answers any limit when it holds fewer than keep (that is the
// whole session) and any limit up to keep otherwise. A load from the
// database races with a write of the same session: the loader registers
// before it reads and a write marks the registration stale, so a loader
// never caches what it read before a write committed.
//
// Most turns start a session (every request of the benchmark does): the
// cache also knows which sessions may exist (a Bloom filter of their ids'
// hashes, primed from the database when the store opens and added to by
// the writer as it stores a session), so a session the filter has
// certainly not seen has no history and is answered without a read, and
// the writer inserts it without looking for its row first. A wrong
// "maybe" only costs that read or that look. The filter's size is fixed,
// so the cache's memory does not grow with the number of sessions (see
// sessionFilter).
type historyCache struct {
	keep, max int
	maxBytes  int // bound of the cached entries' size (entryBytes)
	seed      maphash.Seed
	bytes     int // size of the cached entries (entryBytes)

	mu      sync.Mutex
	entries map[string]*list.Element // of *historyEntry
	lru     *list.List               // front: most recently used
	loading map[string]*historyLoad
	// known filters the sessions stored; nil until primed (then a session
	// it has certainly not seen has no row, and so no messages).
	known *sessionFilter
	// written holds the hashes of the sessions given messages by the
	// writer's transaction not yet committed (markWritten adds, committed
	// empties). A read of any other session's messages needs no commit
	// first: see settled.
	written map[uint64]struct{}
}

type historyEntry struct {
	session string
	msgs    []ChatMessage
	bytes   int // entryBytes of session and msgs
}

type historyLoad struct {
	loaders int
	stale   bool
}

// History cache bounds: messages kept per session (more than the chat
// service's 50-message history), sessions kept, and the size of the
// entries kept (entryBytes). The size bound is what holds memory: a count
// of sessions alone let the cache grow with the length of the messages
// (10,000 sessions of 64 messages of a few KiB each are gigabytes), and
// under a steady load of returning sessions it grew by about 10 MiB a
// minute towards it. Least recently used sessions are evicted first.
//
// The bound was 16 MiB and 10,000 sessions: a load cycling through more
// sessions than that (chat-speed.sh's runs continue the sessions of the
// runs before them) evicted each one before it came back and read every
// history from SQLite, 15 % of the gateway's CPU in such a run
// (docs/benchmarks/2026-11-history.md). Now the size bound alone decides for short
// sessions: 16 MiB holds about 23,000 sessions of one short exchange
// (about 700 bytes each as counted). Memory costs more than the bound
// says: the heap grows to (1 + GOGC/100) times what is live (twice under
// the default collector, five times with server.gc_percent: 400), and
// under GOGC 400 bounds of 64 and 32 MiB added about 300 and 200 MiB of
// RSS under a soak of returning sessions.
const (
	historyKeep     = 64
	historySessions = 100_000
	historyBytes    = 16 << 20
)

// messageOverhead is what a cached message costs besides its strings' bytes
// (the struct and the strings' headers).
const messageOverhead = int(unsafe.Sizeof(ChatMessage{}))

// entryOverhead is what a cached session costs besides its messages: its
// entry, its list element and its slot in the map, about.
const entryOverhead = int(unsafe.Sizeof(historyEntry{})+unsafe.Sizeof(list.Element{})) + 48

// entryBytes is the memory the cache counts for session's entry holding
// msgs.
func entryBytes(session string, msgs []ChatMessage) int {
	return entryOverhead + len(session) + messageBytes(msgs)
}

// messageBytes is the memory the cache counts for msgs, spare capacity
// included.
func messageBytes(msgs []ChatMessage) int {
	n := (cap(msgs) - len(msgs)) * messageOverhead
	for i := range msgs {
		m := &msgs[i]
		n += messageOverhead + len(m.SessionID) + len(m.RunID) + len(m.Role) + len(m.Content) + len(m.ToolCalls) + len(m.ToolCallID) + len(m.Name)
	}
	return n
}

func newHistoryCache(keep, sessions, maxBytes int) *historyCache {
	return &historyCache{keep: keep, max: sessions, maxBytes: maxBytes, seed: maphash.MakeSeed(), entries: map[string]*list.Element{}, lru: list.New(),
		loading: map[string]*historyLoad{}, written: map[uint64]struct{}{}}
}

// prime sets the sessions stored: known holds all of them (their hash),
// read before this process writes any.
func (c *historyCache) prime(known *sessionFilter) {
	c.mu.Lock()
	c.known = known
	c.mu.Unlock()
}

// hash is the hash of session's id the filter of stored sessions holds.
func (c *historyCache) hash(session string) uint64 { return maphash.String(c.seed, session) }

// get returns a copy of the newest limit messages of session, oldest first,
// when the entry can answer.
func (c *historyCache) get(session string, limit int) ([]ChatMessage, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[session]
	if !ok {
		if c.known != nil {
			if !c.known.mayContain(c.hash(session)) {
				return nil, true // no message yet
			}
		}
		return nil, false
	}
	e := el.Value.(*historyEntry)
	if limit > len(e.msgs) && len(e.msgs) >= c.keep {
		return nil, false // older messages exist that the entry does not hold
	}
	c.lru.MoveToFront(el)
	from := max(len(e.msgs)-limit, 0)
	return append([]ChatMessage(nil), e.msgs[from:]...), true
}

// noteSession records that session is stored and reports whether it may
// have been before (false: certainly not, the filter being primed). The
// group-commit writer calls it as it stores the session, before its batch
// commits (a batch rolled back leaves a mark that only costs a look).
func (c *historyCache) noteSession(session string) (mayHaveBeen bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.known == nil {
		return true
	}
	h := c.hash(session)
	had := c.known.mayContain(h)
	c.known.add(h)
	return had
}

// markWritten records that the writer's open transaction gives session
// messages (see settled).
func (c *historyCache) markWritten(session string) {
	c.mu.Lock()
	c.written[c.hash(session)] = struct{}{}
	c.mu.Unlock()
}

// committed is called by the group commit after each commit (under its
// writing lock, as markWritten is): every message written so far is
// committed. A rollback keeps the marks, for the batches the next
// transaction runs again.
func (c *historyCache) committed() {
	c.mu.Lock()
	clear(c.written)
	c.mu.Unlock()
}

// settled reports whether every message of session the writer has
// acknowledged is committed, so that another connection reads them all
// without making the writer commit first (sync). A message acknowledged
// after the call is one of a concurrent exchange, which the read may or
// may not see either way. A hash collision only costs that commit.
func (c *historyCache) settled(session string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, w := c.written[c.hash(session)]
	return !w
}

// startLoad registers a database read of session; finishLoad caches its
// result unless a write of the session committed meanwhile.
func (c *historyCache) startLoad(session string) *historyLoad {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.loading[session]
	if l == nil {
		l = &historyLoad{}
		c.loading[session] = l
	}
	l.loaders++
	return l
}

// finishLoad ends a load; msgs (oldest first) are the newest limit messages
// the database returned, or nil when the read failed.
func (c *historyCache) finishLoad(session string, l *historyLoad, msgs []ChatMessage, limit int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l.loaders--
	if l.loaders == 0 {
		delete(c.loading, session)
	}
	// A read that came back full may have missed older messages: it can
	// stand for the session only if it holds at least keep of them.
	if !ok || l.stale || (len(msgs) == limit && limit < c.keep) {
		return
	}
	if _, cached := c.entries[session]; cached {
		return
	}
	kept := msgs[max(len(msgs)-c.keep, 0):]
	c.put(session, append(make([]ChatMessage, 0, len(kept)+2), kept...))
}

// appended records messages committed to session (with their Seq set).
func (c *historyCache) appended(session string, msgs []ChatMessage) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.loading[session]; l != nil {
		l.stale = true
	}
	el, ok := c.entries[session]
	if !ok {
		if len(msgs) > 0 && msgs[0].Seq == 1 {
			// A new session's first messages are the whole session.
			c.put(session, append([]ChatMessage(nil), msgs[max(len(msgs)-c.keep, 0):]...))
		}
		return
	}
	e := el.Value.(*historyEntry)
	var last int64
	if n := len(e.msgs); n > 0 {
		last = e.msgs[n-1].Seq
	}
	if len(msgs) > 0 && msgs[0].Seq != last+1 {
		// Not the continuation of what the entry holds (two writers of
		// one session committed in an order their updates did not keep):
		// forget it, the next read loads it again.
		c.remove(el)
		return
	}
	e.msgs = append(e.msgs, msgs...)
	if over := len(e.msgs) - c.keep; over > 0 {
		e.msgs = append(e.msgs[:0:0], e.msgs[over:]...)
	}
	c.bytes -= e.bytes
	e.bytes = entryBytes(session, e.msgs)
	c.bytes += e.bytes
	c.lru.MoveToFront(el)
	c.evict()
}

func (c *historyCache) put(session string, msgs []ChatMessage) {
	e := &historyEntry{session: session, msgs: msgs, bytes: entryBytes(session, msgs)}
	c.entries[session] = c.lru.PushFront(e)
	c.bytes += e.bytes
	c.evict()
}

// evict drops the least recently used sessions while the cache is over a
// bound (a session larger than the size bound alone is not kept either).
func (c *historyCache) evict() {
	for c.lru.Len() > 0 && (c.lru.Len() > c.max || c.bytes > c.maxBytes) {
		c.remove(c.lru.Back())
	}
}

func (c *historyCache) remove(el *list.Element) {
	e := el.Value.(*historyEntry)
	c.lru.Remove(el)
	delete(c.entries, e.session)
	c.bytes -= e.bytes
}
