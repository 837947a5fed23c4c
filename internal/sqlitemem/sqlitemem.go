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
// chat path, and the largest single cost of a task run. Three settings end
// it:
//   - SQLITE_CONFIG_MALLOC: SQLite's allocations go through blocks.go,
//     which keeps a bounded number of freed blocks of each power-of-two
//     size for reuse, the large ones (over 16 KiB) included;
//   - SQLITE_CONFIG_PAGECACHE: one slab for page-sized buffers, allocated
//     once and never returned (SQLite falls back to malloc when it is full);
//   - a few pages of each small size class held mapped for the life of the
//     process (holdPages), so each class reuses its free blocks.
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
	// allocPage is modernc.org/memory's page: blocks of one class share it
	// and it is unmapped when its last block is freed.
	allocPage = 1 << 16
	// Each class keeps at least minPages pages and room for classBlocks
	// free blocks mapped (about 5 MiB virtual in all).
	minPages, classBlocks = 4, 64
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

	if rc := configureBlocks(tls); rc != sqlite3.SQLITE_OK {
		return fmt.Errorf("sqlite memory: allocator: %s (was a database opened before?)", errstr(tls, rc))
	}

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
		if err := holdPages(tls, 1<<log); err != nil {
			return err
		}
	}
	return nil
}

// holdPages keeps pages of the size class of size mapped for the life of
// the process: it fills them, then frees every block but the first of each
// page. The freed blocks go on the class's free list, so bursts of up to
// about classBlocks buffers at once (a batch of statements each holding a
// record buffer, say) are served without mapping a page; holding a single
// block kept only one page, and the large classes (three 16 KiB blocks per
// 64 KiB page) still mapped and unmapped a page per statement.
func holdPages(tls *libc.TLS, size int) error {
	perPage := (allocPage - 64) / size // blocks per page, minus the page header (under 64 bytes)
	pages := max(minPages, (classBlocks+perPage-2)/max(perPage-1, 1))
	seen := map[uintptr]bool{}
	var free []uintptr
	for len(seen) < pages {
		b := libc.Xmalloc(tls, libc.Tsize_t(size))
		if b == 0 {
			return fmt.Errorf("sqlite memory: out of memory")
		}
		if pg := b &^ (allocPage - 1); !seen[pg] {
			seen[pg] = true // held: keeps its page mapped
			continue
		}
		free = append(free, b)
	}
	for _, b := range free {
		libc.Xfree(tls, b)
	}
	return nil
}

func errstr(tls *libc.TLS, rc int32) string {
	return libc.GoString(sqlite3.Xsqlite3_errstr(tls, rc))
}
