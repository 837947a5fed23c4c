package models

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// A line appended by hand reads back as the journalLine it stands for,
// whatever the strings hold, with the decided fields over the request's
// earlier encoding of the entry.
func TestAdmissionLineReadsBack(t *testing.T) {
	now := time.Date(2026, 11, 25, 4, 5, 6, 789, time.UTC)
	e := pendingEntry("call \"1\" <é>\\\n", now)
	encoded := encodeForJournal(e)
	e.ReservedMicros, e.MaxOutputTokens, e.Clamped = 31, 9, true
	for _, d := range []*deferredAdmission{
		{id: "a-1", entry: *e, encoded: encoded, keys: []string{"d", "agent:x\u2028y"}, amount: 31, expiresAt: now.Add(time.Hour)},
		{id: "a-\"2\"", entry: *e, keys: nil, amount: 0, expiresAt: now}, // encoded by the writer
	} {
		line, err := appendAdmissionLine([]byte("prefix"), d)
		if err != nil {
			t.Fatal(err)
		}
		if string(line[:6]) != "prefix" || line[len(line)-1] != '\n' {
			t.Fatalf("line %q", line)
		}
		var l journalLine
		if err := json.Unmarshal(line[6:], &l); err != nil {
			t.Fatalf("%q: %v", line[6:], err)
		}
		got := unfinished([]journalLine{l})
		if len(got) != 1 {
			t.Fatalf("%q read back as %d admissions", line[6:], len(got))
		}
		g := got[0]
		if g.id != d.id || !reflect.DeepEqual(g.keys, d.keys) || g.amount != d.amount || !g.expiresAt.Equal(d.expiresAt) {
			t.Errorf("read back %+v, want %+v", g, d)
		}
		if !reflect.DeepEqual(normalizeEntry(g.entry), normalizeEntry(d.entry)) {
			t.Errorf("entry read back\n%+v\nwant\n%+v", g.entry, d.entry)
		}
	}
}

// normalizeEntry drops the monotonic clock and zone pointers, which JSON
// does not keep.
func normalizeEntry(e LedgerEntry) LedgerEntry {
	b, _ := json.Marshal(e)
	var out LedgerEntry
	_ = json.Unmarshal(b, &out)
	return out
}

// The admitting request's encoding of its entry (goccy/go-json) is byte for
// byte encoding/json's, for entries with every kind of field set and with
// strings that need escaping.
func TestJournalEntryEncodingMatches(t *testing.T) {
	now := time.Date(2026, 11, 25, 4, 5, 6, 789, time.FixedZone("x", 3600))
	full := pendingEntry("call \"1\" <é>&\\\n\u2028\x01", now)
	full.ProviderRequestIDs, full.ErrorKind, full.CostUSD, full.Interactive = "r1,r2\xff", "provider_http_503", 0.000123, true
	full.InputTokens, full.ReservedMicros, full.Attempts = 1<<40, -5, 3
	finished := now.Add(time.Second)
	full.FinishedAt = &finished
	for _, e := range []*LedgerEntry{{}, pendingEntry("c", now), full} {
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := encodeForJournal(e); string(got) != string(want) {
			t.Errorf("encoded\n%s\nencoding/json\n%s", got, want)
		}
	}
}

// The writer's share of journaling an admission: encoding/json's encoder
// over the whole line (before) against the line appended around the
// entry the request encoded (now).
func BenchmarkAdmissionLine(b *testing.B) {
	now := time.Now().UTC()
	e := pendingEntry("call-1", now)
	d := &deferredAdmission{id: "a-1", entry: *e, encoded: encodeForJournal(e), keys: []string{"d", "agent:bench"}, amount: 40, expiresAt: now}
	var buf []byte
	b.Run("encoder", func(b *testing.B) {
		var out bytesBuffer
		enc := json.NewEncoder(&out)
		for b.Loop() {
			out.b = out.b[:0]
			exp := d.expiresAt
			_ = enc.Encode(journalLine{Kind: "a", ID: d.id, Entry: &d.entry, Keys: d.keys, Amount: d.amount, ExpiresAt: &exp})
		}
	})
	b.Run("appended", func(b *testing.B) {
		for b.Loop() {
			buf, _ = appendAdmissionLine(buf[:0], d)
		}
	})
}

// BenchmarkJournalEntryEncoding: the admitting request's encoding of its
// ledger entry, with encoding/json (before) and as encodeForJournal does it.
func BenchmarkJournalEntryEncoding(b *testing.B) {
	e := pendingEntry("run_0123456789abcdef0123456789abcdef-t1", time.Now().UTC())
	e.AgentID, e.SessionID, e.RunID = "bench", "s_0123456789abcdef", "run_0123456789abcdef0123456789abcdef"
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(e)
		}
	})
	b.Run("encodeForJournal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeForJournal(e)
		}
	})
}

type bytesBuffer struct{ b []byte }

func (w *bytesBuffer) Write(p []byte) (int, error) { w.b = append(w.b, p...); return len(p), nil }
