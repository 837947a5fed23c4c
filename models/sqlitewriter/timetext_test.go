package sqlitewriter

import (
	"database/sql/driver"
	"math/rand/v2"
	"testing"
	"time"
)

// The text must be exactly what the driver writes for the same time
// (time.Time.String), or rows written before and after would compare and
// sort differently.
func TestUTCTimeTextIsTheDriversText(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	cases := []time.Time{
		time.Date(2026, 11, 25, 4, 5, 6, 0, time.UTC),
		time.Date(2026, 1, 2, 3, 4, 5, 100, time.UTC),
		time.Date(1000, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 6, 7, 8, 9, 10, 120000000, time.UTC),
	}
	for range 10000 {
		cases = append(cases, time.Unix(r.Int64N(253402300799-(-30610224000))-30610224000, r.Int64N(1e9)).UTC())
	}
	for _, c := range cases {
		got, ok := UTCTimeText(c)
		if !ok || got != c.String() {
			t.Fatalf("UTCTimeText(%v) = %q, %v; want %q", c, got, ok, c.String())
		}
	}
	for _, c := range []time.Time{
		time.Now(),         // monotonic reading
		time.Now().Local(), // monotonic reading, local zone
		time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("X", 3600)),
		time.Date(999, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		{},
	} {
		if s, ok := UTCTimeText(c); ok {
			t.Errorf("UTCTimeText(%v) = %q, want it left to the driver", c, s)
		}
	}
	args := []driver.NamedValue{{Value: cases[1]}, {Value: time.Now()}, {Value: int64(3)}}
	var texts TimeTexts
	texts.TimesAsText(args)
	if args[0].Value != cases[1].String() {
		t.Errorf("a UTC time became %v", args[0].Value)
	}
	if _, ok := args[1].Value.(time.Time); !ok {
		t.Errorf("a time with a monotonic reading became %v", args[1].Value)
	}
}

// TestTimeTextsRemembersRecentTimes: a time bound again gets the text it
// got before, and times never get one another's text, whichever of them
// the cache still holds.
func TestTimeTextsRemembersRecentTimes(t *testing.T) {
	base := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	times := []time.Time{base, base.Add(time.Nanosecond), base, base.Add(time.Second), base.Add(time.Nanosecond), base,
		base.Add(time.Nanosecond), base.In(time.FixedZone("X", 0)), base}
	var texts TimeTexts
	for round := range 2 {
		for i, tm := range times {
			args := []driver.NamedValue{{Value: tm}, {Value: tm}}
			texts.TimesAsText(args)
			want := any(tm.String())
			if tm.Location() != time.UTC {
				want = tm // left to the driver
			}
			for _, a := range args {
				if a.Value != want {
					t.Fatalf("round %d, time %d (%v): bound %v, want %v", round, i, tm, a.Value, want)
				}
			}
		}
	}
}

func BenchmarkUTCTimeText(b *testing.B) {
	now := time.Now().UTC()
	b.Run("driver", func(b *testing.B) {
		for b.Loop() {
			_ = now.String()
		}
	})
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			_, _ = UTCTimeText(now)
		}
	})
}
