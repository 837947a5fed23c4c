package vector

import (
	"math"
	"sync"
)

// DefaultCacheBytes bounds the embeddings a Cache keeps: 512 MiB, about
// 500k chunks of 256 dimensions.
const DefaultCacheBytes = 512 << 20

// Cache keeps bases' published embeddings in memory, as one flat float32
// slice per (base, dimension) with their norms, so the vector side of a
// search ranks them without reading them from the database: a brute-force
// scan over memory instead of over pages. Each entry is valid for one
// generation of its base (models.VectorBase, incremented in the
// transaction of every change of the base's visible chunks, by any
// process); a search that finds another generation loads the base again.
// A base too large for the cache is not kept: its searches read the
// embeddings from the database each time. Safe for concurrent use.
type Cache struct {
	mu       sync.Mutex
	max      int64
	used     int64
	entries  map[cacheKey]*cacheEntry
	loadings map[cacheKey]*sync.Mutex
}

type cacheKey struct {
	base string
	dim  int
}

type cacheEntry struct {
	gen   int64
	ids   []int64
	vecs  []float32 // len(ids)*dim
	norms []float32
}

func (e *cacheEntry) bytes() int64 {
	return int64(len(e.ids))*8 + int64(len(e.vecs))*4 + int64(len(e.norms))*4
}

// NewCache keeps up to maxBytes of embeddings (0: DefaultCacheBytes; < 0:
// nothing, every search reads the database).
func NewCache(maxBytes int64) *Cache {
	if maxBytes == 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{max: maxBytes, entries: map[cacheKey]*cacheEntry{}, loadings: map[cacheKey]*sync.Mutex{}}
}

// Rows streams a base's published embeddings of one dimension to add
// (id, vector); vec is only valid during the call.
type Rows func(add func(id int64, vec []float32)) error

// Rank pushes into top the cosine similarity to q (of norm normQ) of every
// published embedding of base with q's dimension, from the cache when it
// holds generation gen of the base, otherwise from rows (which it then
// keeps, if they fit).
func (c *Cache) Rank(base string, gen int64, q []float32, normQ float64, top *TopN, rows Rows) error {
	key := cacheKey{base, len(q)}
	if e := c.get(key, gen); e != nil {
		e.rank(q, normQ, top)
		return nil
	}
	if c.max < 0 {
		return scanRows(rows, q, normQ, top)
	}
	// One load per key at a time: concurrent searches of a changed base
	// wait for the first one's load instead of each reading the base.
	c.mu.Lock()
	l, ok := c.loadings[key]
	if !ok {
		l = &sync.Mutex{}
		c.loadings[key] = l
	}
	c.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if e := c.get(key, gen); e != nil {
		e.rank(q, normQ, top)
		return nil
	}
	e := &cacheEntry{gen: gen}
	tooBig := false
	err := rows(func(id int64, vec []float32) {
		if tooBig {
			return
		}
		e.ids = append(e.ids, id)
		e.vecs = append(e.vecs, vec...)
		e.norms = append(e.norms, float32(Norm(vec)))
		if e.bytes() > c.max {
			tooBig = true
			e.ids, e.vecs, e.norms = nil, nil, nil
		}
	})
	if err != nil {
		return err
	}
	if tooBig {
		c.drop(key)
		return scanRows(rows, q, normQ, top)
	}
	c.put(key, e)
	e.rank(q, normQ, top)
	return nil
}

func scanRows(rows Rows, q []float32, normQ float64, top *TopN) error {
	return rows(func(id int64, vec []float32) { top.Push(id, Cosine(q, normQ, vec)) })
}

func (c *Cache) get(key cacheKey, gen int64) *cacheEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok && e.gen == gen {
		return e
	}
	return nil
}

func (c *Cache) drop(key cacheKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.used -= old.bytes()
		delete(c.entries, key)
	}
}

// put keeps e, dropping other entries (the oldest generation data of
// other bases, in no particular order) until it fits.
func (c *Cache) put(key cacheKey, e *cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.entries[key]; ok {
		c.used -= old.bytes()
		delete(c.entries, key)
	}
	for k, old := range c.entries {
		if c.used+e.bytes() <= c.max {
			break
		}
		c.used -= old.bytes()
		delete(c.entries, k)
	}
	c.entries[key] = e
	c.used += e.bytes()
}

// Bytes is how much the cache holds.
func (c *Cache) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.used
}

func (e *cacheEntry) rank(q []float32, normQ float64, top *TopN) {
	if normQ == 0 {
		return
	}
	dim := len(q)
	for i, id := range e.ids {
		nb := e.norms[i]
		if nb == 0 {
			top.Push(id, 0)
			continue
		}
		v := e.vecs[i*dim : (i+1)*dim : (i+1)*dim]
		var dot float32
		for j, x := range q {
			dot += x * v[j]
		}
		s := float64(dot) / (normQ * float64(nb))
		if math.IsNaN(s) {
			s = 0
		}
		top.Push(id, s)
	}
}
