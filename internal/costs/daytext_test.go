package costs

import (
	"testing"
	"time"
)

func TestTextsOfDayAgreeWithFormat(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	times := []time.Time{
		time.Date(2026, 11, 27, 23, 59, 59, 999999999, time.UTC),
		time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 0, 30, 0, 0, berlin), // still the 27th in UTC
		time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1900, 3, 1, 6, 0, 0, 0, time.UTC),
		time.Date(2024, 2, 29, 23, 0, 0, 0, berlin),
	}
	// Twice over, so that every time is also looked up after a different
	// day was cached.
	for range 2 {
		for _, at := range times {
			want := at.UTC().Format(time.DateOnly)
			d := textsOfDay(at)
			if d.date != want || d.key != "day:"+want || dayKey(at) != "day:"+want {
				t.Fatalf("%v: date %q key %q, want %q", at, d.date, d.key, want)
			}
		}
	}
}
