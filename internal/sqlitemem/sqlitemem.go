// Package sqlitemem sets up SQLite's memory use for this process once,
// before the first database is opened (ours and the embedded Temporal
// server's share the one pure-Go SQLite and its allocator).
//
// Why: modernc.org/sqlite allocates through modernc.org/memory, which maps
// a 64 KiB page per size class and unmaps it the moment its last block is
// freed, and maps anything above 16 KiB on its own. SQLite allocates and
// frees the same buffers for every statement: a page cache and a scratch
// page for each RETURNING or IN (...) list (ephemeral tables), statement
// journal chunks inside a transaction. So a steady write load turned into
// an mmap and a munmap per statement: a quarter of the gateway's CPU on the
// chat path, and the largest single cost of a task run. Two settings end
// it:
//   - SQLITE_CONFIG_PAGECACHE: one slab for page-sized buffers, allocated
//     once and never returned (SQLite falls back to malloc when it is full);
//   - one block of each small size class held for the life of the process,
//     so each class keeps its page mapped and reuses it.
//
// The memory is virtual until touched; the slab's resident part follows
// the pages in use, as SQLite reuses freed slots first.
package sqlitemem

import (
	"encoding/binary"
	"fmt"
	"sync"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

const (
	// PageSize is the database page size the slab serves (SQLite's default,
	// used by both databases). Pages of other sizes fall back to malloc.
	PageSize = 4096
	// SlabPages is the slab's number of page buffers (about 18 MiB
	// virtual): enough for the page caches of the gateway's and Temporal's
	// connections at the default cache size; more come from malloc.
	SlabPages = 4096

	// Size classes of modernc.org/memory's shared pages: 16 B to 16 KiB.
	minClassLog, maxClassLog = 4, 14
)

var (
	once   sync.Once
	result error
)

// Configure applies the settings; every call after the first returns the
// first call's result. It must run before any SQLite database is opened in
// the process (SQLite refuses configuration once initialised; the error
// then says so, and SQLite works as before, only slower).
func Configure() error {
	once.Do(func() { result = configure() })
	return result
}

func configure() error {
	tls := libc.NewTLS()
	defer tls.Close()

	hdr := libc.Xmalloc(tls, 8)
	if hdr == 0 {
		return fmt.Errorf("sqlite memory: out of memory")
	}
	defer libc.Xfree(tls, hdr)
	va := libc.NewVaList(hdr)
	rc := sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_PCACHE_HDRSZ, va)
	libc.Xfree(tls, va)
	if rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite memory: page cache header size: %s", errstr(tls, rc))
	}
	slot := int32(PageSize) + int32(binary.NativeEndian.Uint32(libc.GoBytes(hdr, 4)))
	slab := libc.Xmalloc(tls, libc.Tsize_t(slot)*SlabPages)
	if slab == 0 {
		return fmt.Errorf("sqlite memory: cannot allocate the page cache slab")
	}
	va = libc.NewVaList(slab, slot, int32(SlabPages))
	rc = sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_PAGECACHE, va)
	libc.Xfree(tls, va)
	if rc != sqlite3.SQLITE_OK {
		libc.Xfree(tls, slab)
		return fmt.Errorf("sqlite memory: page cache slab: %s (was a database opened before?)", errstr(tls, rc))
	}
	for log := minClassLog; log <= maxClassLog; log++ {
		libc.Xmalloc(tls, libc.Tsize_t(1)<<log) // held for the life of the process
	}
	return nil
}

func errstr(tls *libc.TLS, rc int32) string {
	return libc.GoString(sqlite3.Xsqlite3_errstr(tls, rc))
}
