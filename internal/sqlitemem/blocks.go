package sqlitemem

import (
	"math/bits"
	"sync"
	"unsafe"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite's allocator (SQLITE_CONFIG_MALLOC): SQLite's default methods pass
// every allocation straight to modernc.org/memory, which maps every block
// above 16 KiB on its own (and unmaps it on free) and unmaps a shared page
// as soon as its last block is freed. A statement's program (its opcode
// array grows by doubling past 16 KiB for Temporal's visibility REPLACE
// with its FTS triggers), its parse tree, B-tree balancing buffers and WAL
// checkpoints all allocate and free such blocks, so the one-slab and
// held-block settings still left about 15 % of a task-run load's CPU in
// mmap/munmap. These methods round every request up to a power of two and
// keep a bounded number of freed blocks per size for reuse; a block past
// the bound goes back to modernc's allocator as before.
const (
	// blockHeader precedes every block: its usable size (as SQLite's
	// default methods do, so xSize needs no lookup).
	blockHeader = 8
	// minBlockLog and maxBlockLog bound the size classes kept for reuse
	// (16 B to 1 MiB with the header); larger requests are not rounded
	// and not kept.
	minBlockLog, maxBlockLog = 4, 20
	// keptBytesPerClass bounds the freed memory kept per size class (at
	// least keptBlocksMin blocks): at most about 10 MiB over all classes.
	keptBytesPerClass = 512 << 10
	keptBlocksMin     = 8
)

var blocks struct {
	mu   sync.Mutex
	kept [maxBlockLog + 1][]uintptr
}

// blockClass is the size class of a request of n usable bytes, or 0 when
// n is too large to keep.
func blockClass(n int) uint {
	log := uint(bits.Len(uint(n + blockHeader - 1)))
	if log < minBlockLog {
		log = minBlockLog
	}
	if log > maxBlockLog {
		return 0
	}
	return log
}

func keptMax(log uint) int {
	return max(keptBlocksMin, keptBytesPerClass>>log)
}

// at turns an address of SQLite's memory (mapped by modernc.org/memory,
// outside the Go heap: never moved or collected) into a pointer, in a way
// vet's unsafeptr check accepts.
func at(p uintptr) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func setSize(p uintptr, n int) uintptr {
	*(*int64)(at(p)) = int64(n)
	return p + blockHeader
}

func sizeOf(p uintptr) int { return int(*(*int64)(at(p - blockHeader))) }

func xMalloc(tls *libc.TLS, n int32) uintptr {
	log := blockClass(int(n))
	if log == 0 {
		p := libc.Xmalloc(tls, libc.Tsize_t(n)+blockHeader)
		if p == 0 {
			return 0
		}
		return setSize(p, int(n))
	}
	blocks.mu.Lock()
	if k := blocks.kept[log]; len(k) > 0 {
		p := k[len(k)-1]
		blocks.kept[log] = k[:len(k)-1]
		blocks.mu.Unlock()
		return p
	}
	blocks.mu.Unlock()
	p := libc.Xmalloc(tls, libc.Tsize_t(1)<<log)
	if p == 0 {
		return 0
	}
	return setSize(p, 1<<log-blockHeader)
}

func xFree(tls *libc.TLS, p uintptr) {
	if log := blockClass(sizeOf(p)); log != 0 {
		blocks.mu.Lock()
		if len(blocks.kept[log]) < keptMax(log) {
			blocks.kept[log] = append(blocks.kept[log], p)
			blocks.mu.Unlock()
			return
		}
		blocks.mu.Unlock()
	}
	libc.Xfree(tls, p-blockHeader)
}

func xRealloc(tls *libc.TLS, p uintptr, n int32) uintptr {
	old := sizeOf(p)
	oldLog, newLog := blockClass(old), blockClass(int(n))
	if oldLog != 0 && oldLog == newLog {
		return p
	}
	if oldLog == 0 && newLog == 0 {
		q := libc.Xrealloc(tls, p-blockHeader, libc.Tsize_t(n)+blockHeader)
		if q == 0 {
			return 0
		}
		return setSize(q, int(n))
	}
	q := xMalloc(tls, n)
	if q == 0 {
		return 0
	}
	keep := min(old, int(n))
	copy(unsafe.Slice((*byte)(at(q)), keep), unsafe.Slice((*byte)(at(p)), keep))
	xFree(tls, p)
	return q
}

func xSize(tls *libc.TLS, p uintptr) int32 {
	if p == 0 {
		return 0
	}
	return int32(sizeOf(p))
}

// xRoundup is the usable size xMalloc gives a request of n bytes; SQLite
// asks for that much and uses all of it.
func xRoundup(tls *libc.TLS, n int32) int32 {
	if log := blockClass(int(n)); log != 0 {
		return 1<<log - blockHeader
	}
	return (n + 7) &^ 7
}

func xInit(tls *libc.TLS, _ uintptr) int32 { return sqlite3.SQLITE_OK }

func xShutdown(tls *libc.TLS, _ uintptr) {}

// funcPointer is how the translated C code represents a function pointer:
// the data word of the func value (modernc's __ccgo_fp).
func funcPointer(f any) uintptr {
	type iface [2]uintptr
	return (*iface)(unsafe.Pointer(&f))[1]
}

// configureBlocks installs the methods above (SQLite copies the struct).
func configureBlocks(tls *libc.TLS) int32 {
	var m sqlite3.Tsqlite3_mem_methods
	m.FxMalloc = funcPointer(xMalloc)
	m.FxFree = funcPointer(xFree)
	m.FxRealloc = funcPointer(xRealloc)
	m.FxSize = funcPointer(xSize)
	m.FxRoundup = funcPointer(xRoundup)
	m.FxInit = funcPointer(xInit)
	m.FxShutdown = funcPointer(xShutdown)
	pm := libc.Xmalloc(tls, libc.Tsize_t(unsafe.Sizeof(m)))
	if pm == 0 {
		return sqlite3.SQLITE_NOMEM
	}
	defer libc.Xfree(tls, pm)
	*(*sqlite3.Tsqlite3_mem_methods)(at(pm)) = m
	va := libc.NewVaList(pm)
	defer libc.Xfree(tls, va)
	return sqlite3.Xsqlite3_config(tls, sqlite3.SQLITE_CONFIG_MALLOC, va)
}
