package costs

import (
	"sync/atomic"
	"time"
)

// dayTexts are the texts of one UTC day that every admission needs: its
// date (price effective dates and counter keys compare against it) and its
// day counter's key. Formatting them took three time.Format calls and their
// allocations per call; they change once a day.
type dayTexts struct {
	day  int64  // days since 1970-01-01 (negative before)
	date string // 2006-01-02
	key  string // dayKey
}

// lastDay is the day texts were last worked out for.
var lastDay atomic.Pointer[dayTexts]

// textsOfDay returns the texts of t's UTC day.
func textsOfDay(t time.Time) *dayTexts {
	day := t.Unix() / 86400
	if t.Unix()%86400 < 0 {
		day-- // floor, not truncation, before 1970
	}
	if d := lastDay.Load(); d != nil && d.day == day {
		return d
	}
	date := t.UTC().Format(time.DateOnly)
	d := &dayTexts{day: day, date: date, key: "day:" + date}
	lastDay.Store(d)
	return d
}
