package models

import (
	"fmt"
	"hash/maphash"
	"testing"
)

// TestSessionFilter: every session added is answered "maybe" (a filter
// that forgot one would make its history look empty); at capacity about
// the expected share of other sessions is answered "maybe" too; and the
// filter keeps its size however many sessions are added past it.
func TestSessionFilter(t *testing.T) {
	f := newSessionFilter(0)
	seed := maphash.MakeSeed()
	hash := func(prefix string, i int) uint64 { return maphash.String(seed, fmt.Sprintf("%s-%d", prefix, i)) }
	size := len(f.words)
	const added = minSessionFilterCapacity
	for i := range added {
		f.add(hash("in", i))
	}
	for i := range added {
		if !f.mayContain(hash("in", i)) {
			t.Fatalf("session %d was added, and the filter answers certainly not", i)
		}
	}
	const probes = 200_000
	wrong := 0
	for i := range probes {
		if f.mayContain(hash("out", i)) {
			wrong++
		}
	}
	rate, want := float64(wrong)/probes, f.falsePositiveRate(added)
	if rate > 1.5*want || rate < want/1.5 {
		t.Errorf("at capacity %.4f of sessions never added answered maybe; expected %.4f", rate, want)
	}
	if want > 0.01 {
		t.Errorf("expected false positives at capacity %.4f, want at most 1 %%", want)
	}
	for i := range added {
		f.add(hash("more", i))
	}
	if len(f.words) != size {
		t.Fatalf("the filter grew from %d to %d words", size, len(f.words))
	}
	if newSessionFilter(3*minSessionFilterCapacity).nbits < 6*minSessionFilterCapacity*sessionFilterBitsPerSession {
		t.Fatal("a filter primed with many sessions is not sized for twice as many")
	}
}
