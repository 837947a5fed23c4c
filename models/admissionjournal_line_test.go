package models

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	gojson "github.com/goccy/go-json"
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

// appendLedgerEntry writes every field encoding/json writes: an entry
// with each field set (by reflection, so a field added to LedgerEntry is
// set too) and entries with awkward floats and times encode to
// encoding/json's bytes, and what encoding/json refuses is refused.
func TestJournalEntryEncodingCoversEveryField(t *testing.T) {
	var e LedgerEntry
	v := reflect.ValueOf(&e).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("value of %s", v.Type().Field(i).Name))
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 1))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Float64:
			f.SetFloat(0.25)
		case reflect.Struct, reflect.Pointer:
			switch f.Interface().(type) {
			case time.Time:
				f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, i, time.UTC)))
			case *time.Time:
				at := time.Date(2027, 1, 2, 3, 4, 5, i, time.FixedZone("", -5*3600))
				f.Set(reflect.ValueOf(&at))
			case *int64:
				n := int64(i)
				f.Set(reflect.ValueOf(&n))
			default:
				t.Fatalf("field %s: a %s the test does not fill", v.Type().Field(i).Name, f.Type())
			}
		default:
			t.Fatalf("field %s: a %s the test does not fill", v.Type().Field(i).Name, f.Type())
		}
	}
	cases := []LedgerEntry{e}
	for _, f := range []float64{0, -0.5, 1e-6, 9.99e-7, 1e20, 1e21, 123456.789, 5e-324, -1e300} {
		c := e
		c.CostUSD = f
		cases = append(cases, c)
	}
	for _, at := range []time.Time{{}, time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.FixedZone("", 14*3600)),
		time.Date(2026, 6, 1, 0, 0, 0, 0, time.FixedZone("", 5*3600+30*60+7)), time.Date(2026, 6, 1, 0, 0, 0, 1, time.Local)} {
		c := e
		c.CreatedAt = at
		cases = append(cases, c)
	}
	for i := range cases {
		want, wantErr := json.Marshal(&cases[i])
		got, err := appendLedgerEntry(nil, &cases[i])
		if wantErr != nil {
			t.Fatalf("case %d: encoding/json refused it: %v", i, wantErr)
		}
		if err != nil || string(got) != string(want) {
			t.Errorf("case %d:\n got %s (%v)\nwant %s", i, got, err, want)
		}
	}
	for _, bad := range []LedgerEntry{{CostUSD: math.NaN()}, {CostUSD: math.Inf(1)}, {CreatedAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
		{UpdatedAt: time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)}} {
		if _, wantErr := json.Marshal(&bad); wantErr == nil {
			t.Fatalf("encoding/json accepted %+v", bad)
		}
		if _, err := appendLedgerEntry(nil, &bad); err == nil {
			t.Errorf("accepted what encoding/json refuses: cost %v, created %v, updated %v", bad.CostUSD, bad.CreatedAt, bad.UpdatedAt)
		}
		if encodeForJournal(&bad) != nil {
			t.Error("encodeForJournal encoded what encoding/json refuses")
		}
	}
}

// BenchmarkEncodeForJournal: a pending entry as the admitting request
// encodes it, by goccy/go-json's reflection (before) and field by field
// (now).
func BenchmarkEncodeForJournal(b *testing.B) {
	e := pendingEntry("0194f6a2-7d1c-7c3e-9a55-2f1b3c4d5e6f", time.Now().UTC())
	e.AgentID, e.Workspace, e.SessionID, e.RunID = "bench", "/srv/agentry", "http-1c9f2bc39dac8241ce0149a8", "run_01a21d43eeef724eac0264b4683ad3b3"
	b.Run("goccy", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gojson.Marshal(e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("by-hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if encodeForJournal(e) == nil {
				b.Fatal("not encoded")
			}
		}
	})
}
