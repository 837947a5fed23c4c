package sqlitewriter

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// literalTestSQL has one parameter of each mode.
const literalTestSQL = `INSERT INTO lit (id, a, b, c, d) VALUES (?, ?, ?, ?, ?)`

// literalTestStmt returns a statement of literalTestSQL with no variant yet.
func literalTestStmt() *Literal {
	return NewLiteral(literalTestSQL, BindValue, InlineValue, InlineValue, InlineIfZero, InlineIfZero)
}

func literalTestDB(t *testing.T) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "lit.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE lit (id INTEGER, a TEXT, b NUMERIC, c, d)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// A row written through a literal statement is the row binding writes:
// same values, same storage classes, whatever the strings hold.
func TestLiteralSQLStoresWhatBindingStores(t *testing.T) {
	db := literalTestDB(t)
	c := literalTestStmt()
	for i, args := range [][]any{
		{"agent", true, "", int64(0)},
		{"O'Brien '' ; DROP TABLE lit; --", false, int64(0), false},
		{"", int64(7), "set", int64(3)},        // non-zero: bound
		{"nul\x00inside", "5", 0, "x"},         // NUL: bound
		{"bad utf-8 \xff", 1, "", true},        // invalid UTF-8: bound
		{strings.Repeat("l", 129), "é", "", 0}, // too long: bound
		{"ünïcödé ✓", "12.5", "", 2.5},         // a float: bound
	} {
		bound := append([]any{int64(2 * i)}, args...)
		if _, err := db.Exec(literalTestSQL, bound...); err != nil {
			t.Fatalf("row %d bound: %v", i, err)
		}
		spelled := append([]any{int64(2*i + 1)}, args...)
		q, rest := c.Specialize(spelled)
		if _, err := db.Exec(q, rest...); err != nil {
			t.Fatalf("row %d literal (%s): %v", i, q, err)
		}
	}
	rows, err := db.Query(`SELECT id, typeof(a), a, typeof(b), b, typeof(c), c, typeof(d), d FROM lit ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][]any
	for rows.Next() {
		v := make([]any, 9)
		p := make([]any, 9)
		for i := range v {
			p[i] = &v[i]
		}
		if err := rows.Scan(p...); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if len(got) != 14 {
		t.Fatalf("%d rows, want 14", len(got))
	}
	for i := 0; i < len(got); i += 2 {
		if b, l := got[i][1:], got[i+1][1:]; !reflect.DeepEqual(b, l) {
			t.Errorf("row %d: bound %v, literal %v", i/2, b, l)
		}
	}
}

// Values that may be spelled are, and the statement binds only the rest.
func TestLiteralSQLSpellsWhatItMay(t *testing.T) {
	c := literalTestStmt()
	args := []any{int64(1), "it's", true, "", int64(9)}
	q, rest := c.Specialize(args)
	if want := `INSERT INTO lit (id, a, b, c, d) VALUES (?, 'it''s', 1, '', ?)`; q != want {
		t.Fatalf("text %q, want %q", q, want)
	}
	if !reflect.DeepEqual(rest, []any{int64(1), int64(9)}) {
		t.Fatalf("bound %v", rest)
	}
	// The same values find the same text; other ones another.
	q2, _ := c.Specialize([]any{int64(2), "it's", true, "", int64(10)})
	q3, _ := c.Specialize([]any{int64(3), "its", true, "", int64(10)})
	if q2 != q || q3 == q {
		t.Fatalf("texts %q %q %q", q, q2, q3)
	}
	// A string and an integer that read alike are different texts.
	qs, _ := c.Specialize([]any{int64(4), "1", "x", "", int64(0)})
	qi, _ := c.Specialize([]any{int64(5), int64(1), "x", "", int64(0)})
	if qs == qi {
		t.Fatalf("the string \"1\" and the integer 1 share the text %q", qs)
	}
	// A value of a type never spelled (here []byte, which cannot even be
	// compared) where the last text spelled a string is bound.
	q, rest = c.Specialize([]any{int64(7), []byte("x"), true, "", int64(0)})
	if strings.Contains(q, "'x'") || len(rest) != 2 {
		t.Fatalf("text %q with %d arguments", q, len(rest))
	}
	// Nothing to spell: the plain statement, args untouched.
	args = []any{int64(6), strings.Repeat("x", maxLiteralLen+1), 1.5, "y", int64(1)}
	q, rest = c.Specialize(args)
	if q != literalTestSQL || len(rest) != 5 {
		t.Fatalf("text %q with %d arguments", q, len(rest))
	}
}

// A statement has at most maxLiteralVariants texts; values seen after that
// are bound, and the texts already made still serve.
func TestLiteralSQLVariantsAreBounded(t *testing.T) {
	c := literalTestStmt()
	for i := range maxLiteralVariants {
		q, _ := c.Specialize([]any{int64(i), fmt.Sprintf("agent-%d", i), true, "", int64(0)})
		if q == literalTestSQL {
			t.Fatalf("variant %d not made", i)
		}
	}
	q, rest := c.Specialize([]any{int64(0), "one too many", true, "", int64(0)})
	if q != literalTestSQL || len(rest) != 5 {
		t.Fatalf("past the bound: text %q with %d arguments", q, len(rest))
	}
	if q, _ := c.Specialize([]any{int64(0), "agent-3", true, "", int64(0)}); q == literalTestSQL {
		t.Fatal("a variant made before the bound is no longer used")
	}
	if n := len(c.variants); n != maxLiteralVariants {
		t.Fatalf("%d variants", n)
	}
}

func TestNewLiteralSQLChecksItsModes(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a statement with more parameters than modes was accepted")
		}
	}()
	NewLiteral(literalTestSQL, BindValue)
}
