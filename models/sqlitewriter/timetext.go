package sqlitewriter

import (
	"database/sql/driver"
	"time"
)

// SQLite has no time type: modernc's driver binds a time.Time as the text
// of time.Time.String ("2006-01-02 15:04:05.999999999 -0700 MST"), the
// format every row of the store was written in. That goes through the
// general layout interpreter, and the group commit's writer formats about
// ten times per chat request, serially, for every request of the gateway
// (1.8 % of its CPU at 64 connections). TimesAsText binds the same text,
// written directly, for the times the store passes: UTC, without a
// monotonic reading, years 1000-9999. Any other time is left to the driver.

// TimeTexts replaces the common times among a statement's arguments by
// their text (TimesAsText). It keeps the last few times it wrote: the
// writer binds the same instant several times per chat request (a
// session's created and updated times and its messages' all hold one "now",
// a ledger row its finish twice), and each text, and the interface value
// holding it, is otherwise one more allocation. One per connection: a
// connection runs one statement at a time.
type TimeTexts struct {
	times [timeTextsKept]time.Time
	texts [timeTextsKept]driver.Value
	next  int
}

// timeTextsKept is how many distinct times a TimeTexts remembers (a chat
// request's exchange binds two: its start and now).
const timeTextsKept = 2

// TimesAsText replaces the common times among args by their text, in place
// (args are the driver's own copy of a statement's arguments).
func (c *TimeTexts) TimesAsText(args []driver.NamedValue) {
	for i := range args {
		t, ok := args[i].Value.(time.Time)
		if !ok {
			continue
		}
		if v := c.text(t); v != nil {
			args[i].Value = v
		}
	}
}

// text is t's text as a driver value, or nil when t is left to the driver.
func (c *TimeTexts) text(t time.Time) driver.Value {
	for k := range c.times {
		// ==, not Equal: the text depends on the location too. An empty
		// slot (no text yet) matches nothing.
		if c.texts[k] != nil && c.times[k] == t {
			return c.texts[k]
		}
	}
	s, ok := UTCTimeText(t)
	if !ok {
		return nil
	}
	c.times[c.next], c.texts[c.next] = t, s
	v := c.texts[c.next]
	c.next = (c.next + 1) % timeTextsKept
	return v
}

// UTCTimeText is t.String() for a UTC time without a monotonic reading in
// years 1000-9999 (ok false for any other time).
func UTCTimeText(t time.Time) (string, bool) {
	if t.Location() != time.UTC || t != t.Round(0) {
		return "", false
	}
	year, month, day := t.Date()
	if year < 1000 || year > 9999 {
		return "", false
	}
	hour, min, sec := t.Clock()
	var b [40]byte
	p := appendDigits(b[:0], year, 4)
	p = append(p, '-')
	p = appendDigits(p, int(month), 2)
	p = append(p, '-')
	p = appendDigits(p, day, 2)
	p = append(p, ' ')
	p = appendDigits(p, hour, 2)
	p = append(p, ':')
	p = appendDigits(p, min, 2)
	p = append(p, ':')
	p = appendDigits(p, sec, 2)
	if ns := t.Nanosecond(); ns != 0 {
		// ".999999999": nine digits, trailing zeros dropped.
		digits := 9
		for ns%10 == 0 {
			ns /= 10
			digits--
		}
		p = append(p, '.')
		p = appendDigits(p, ns, digits)
	}
	p = append(p, " +0000 UTC"...)
	return string(p), true
}

// appendDigits appends v (>= 0) with exactly width digits, zero-padded.
func appendDigits(b []byte, v, width int) []byte {
	var d [9]byte
	for i := width - 1; i >= 0; i-- {
		d[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, d[:width]...)
}
