package sqlitewriter

import (
	"sync/atomic"
	"unsafe"
)

// BoxStable returns s as an interface value, the same one each time for a
// string that is the same from call to call: an agent's id and model, the
// workspace, a price's version, a status constant. Boxing a string
// allocates (Go copies its header to the heap), and a chat request's
// statements box about twenty such strings, as arguments each binds or
// spells (see literalSQL), on the writer's goroutine.
//
// A string is recognised by where its bytes are and how many there are:
// strings are immutable, so the same bytes at the same address are the same
// string. A string the request made itself (a call id, a reply) never
// matches and is boxed anew, so callers use BoxStable only for values that
// come from configuration or constants; anything else would only churn the
// table. The table holds a few hundred entries (and keeps their strings
// alive), one per slot, the last one boxed there.
func BoxStable(s string) any {
	if s == "" {
		return s // the empty string boxes without an allocation
	}
	data := unsafe.StringData(s)
	slot := &stableBoxes[(uintptr(unsafe.Pointer(data))>>3^uintptr(len(s)))%uintptr(len(stableBoxes))]
	if b := slot.Load(); b != nil && b.data == data && b.len == len(s) {
		return b.boxed
	}
	boxed := any(s)
	slot.Store(&stableBox{data: data, len: len(s), boxed: boxed})
	return boxed
}

type stableBox struct {
	data  *byte
	len   int
	boxed any
}

var stableBoxes [512]atomic.Pointer[stableBox]
