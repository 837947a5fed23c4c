package models

import (
	"math"
	"math/bits"
)

// sessionFilter is a Bloom filter of session ids (their 64-bit hashes): it
// answers "certainly not" or "maybe" for whether a session was added.
// The history cache uses it to answer a new session's history without a
// read (see historyCache); a wrong "maybe" only costs that read.
//
// It is sized once, when the store opens, and never grows: its memory
// stays the same however many sessions the gateway starts while it runs
// (a set of every session grew by tens of bytes a session, about 1.7 GB in
// a ten-minute soak of fresh sessions). Past its capacity it answers
// "maybe" more often, and so reads more, but it stays correct.
type sessionFilter struct {
	words  []uint64
	nbits  uint64
	probes int
}

// sessionFilterBitsPerSession and sessionFilterProbes give about 1 %
// wrong "maybe" answers at capacity (10 bits and 7 probes: 0.8 %).
const (
	sessionFilterBitsPerSession = 10
	sessionFilterProbes         = 7
)

// minSessionFilterCapacity is the smallest capacity: 8 million sessions
// in 10 MB, about twenty minutes of fresh sessions at the load of
// docs/benchmarks/2026-11-history.md before its answers reach 1 % wrong.
const minSessionFilterCapacity = 8_000_000

// newSessionFilter returns a filter for twice the sessions it is primed
// with (stored), at least minSessionFilterCapacity.
func newSessionFilter(stored int) *sessionFilter {
	capacity := max(uint64(stored)*2, minSessionFilterCapacity)
	nbits := capacity * sessionFilterBitsPerSession
	return &sessionFilter{words: make([]uint64, (nbits+63)/64), nbits: nbits, probes: sessionFilterProbes}
}

// add records the session whose id hashes to h.
func (f *sessionFilter) add(h uint64) {
	for i, step := 0, probeStep(h); i < f.probes; i++ {
		b := f.bit(h + uint64(i)*step)
		f.words[b/64] |= 1 << (b % 64)
	}
}

// mayContain reports whether the session whose id hashes to h may have
// been added (false: certainly not).
func (f *sessionFilter) mayContain(h uint64) bool {
	for i, step := 0, probeStep(h); i < f.probes; i++ {
		b := f.bit(h + uint64(i)*step)
		if f.words[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// probeStep is the distance between a hash's probes (double hashing, as
// Kirsch and Mitzenmacher showed good enough for a Bloom filter): the
// hash's bits mixed again, odd so that it never repeats a probe early.
func probeStep(h uint64) uint64 {
	return bits.RotateLeft64(h*0x9E3779B97F4A7C15, 31) | 1
}

// bit maps x to a bit of the filter: the high word of x times the size is
// uniform over [0, nbits) without a division.
func (f *sessionFilter) bit(x uint64) uint64 {
	hi, _ := bits.Mul64(x, f.nbits)
	return hi
}

// falsePositiveRate is the expected share of wrong "maybe" answers once n
// sessions were added.
func (f *sessionFilter) falsePositiveRate(n int) float64 {
	k := float64(f.probes)
	return math.Pow(1-math.Exp(-k*float64(n)/float64(f.nbits)), k)
}
