package sqlitewriter

import (
	"database/sql/driver"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// Every value database/sql hands the driver comes back from the log as it
// went in; anything else is refused rather than recorded wrongly.
func TestRedoValuesRoundTrip(t *testing.T) {
	when := time.Date(2026, 11, 25, 1, 2, 3, 456789, time.FixedZone("x", 3600))
	in := []driver.Value{nil, int64(-42), 3.25, true, false, []byte{0, 1, 2}, "text é", when, ""}
	r := &RedoLog{}
	args := make([]driver.NamedValue, len(in))
	for i, v := range in {
		args[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	if err := r.Add("INSERT x", args); err != nil {
		t.Fatal(err)
	}
	if err := r.Add("DELETE y", nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	err := eachStatement(r.cur, func(q string, a []any) error {
		got = append(got, q)
		if q == "INSERT x" {
			for i, v := range a {
				if tm, ok := v.(time.Time); ok {
					if !tm.Equal(when) || tm.Format(time.RFC3339Nano) != when.Format(time.RFC3339Nano) {
						t.Errorf("time %v, want %v", tm, when)
					}
					continue
				}
				if !reflect.DeepEqual(v, any(in[i])) {
					t.Errorf("arg %d = %#v, want %#v", i, v, in[i])
				}
			}
		}
		return nil
	})
	if err != nil || !reflect.DeepEqual(got, []string{"INSERT x", "DELETE y"}) {
		t.Fatalf("statements %v, %v", got, err)
	}
	if err := r.Add("INSERT z", []driver.NamedValue{{Ordinal: 1, Value: struct{}{}}}); err == nil {
		t.Fatal("an unknown argument type was recorded")
	}
}

// A record cut short by a crash, or damaged, ends the log: the records
// before it are read, nothing after it.
func TestRedoRecordsStopAtADamagedTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := &RedoLog{f: f}
	for i := range 3 {
		if err := r.Add(fmt.Sprintf("Q%d", i), nil); err != nil {
			t.Fatal(err)
		}
		if err := r.Write(); err != nil {
			t.Fatal(err)
		}
	}
	whole, _ := os.ReadFile(path)
	for _, tc := range []struct {
		name string
		data []byte
		want int
	}{
		{"whole", whole, 3},
		{"last cut short", whole[:len(whole)-3], 2},
		{"a byte of the second flipped", flip(whole, 20), 1},
		{"empty", nil, 0},
	} {
		if err := os.WriteFile(path, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		recs, err := readRedoRecords(f)
		if err != nil || len(recs) != tc.want {
			t.Errorf("%s: %d records (%v), want %d", tc.name, len(recs), err, tc.want)
		}
		for i, rec := range recs {
			if rec.seq != uint64(i+1) {
				t.Errorf("%s: record %d has seq %d", tc.name, i, rec.seq)
			}
		}
	}
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0xff
	return c
}
