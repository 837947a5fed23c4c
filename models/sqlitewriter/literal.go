package sqlitewriter

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// The writer's hot INSERTs spell their low-cardinality values in the SQL
// text instead of binding them (literal statements).
//
// A chat request binds about 90 values in its five INSERTs, and most of
// them are the same for every request of an agent: its id, workspace,
// source, provider and model, the price's version and source, the mode,
// an empty error, a zero token count. Binding a value costs the driver a C
// copy of each string, SQLite's connection mutex twice (bind, then unbind
// after the step) and a copy into the redo log: binding was about a tenth
// of the gateway's CPU at 64 connections. A statement with those values in
// its text binds only what varies (ids, times, counts); its program loads
// the constants itself. A 44-column ledger row took 14.5 µs bound and
// 10.6 µs with its constant values in the text (BenchmarkLiteralInsert,
// medians of three runs).
//
// Each distinct combination of inlined values is a statement of its own,
// prepared once on the writer's connection. A statement (Literal) has
// at most maxLiteralVariants of them, the first combinations seen; later
// ones run the plain statement, bound value by value, so a column that
// turns out to vary (many principals, say) costs a prepared statement per
// variant up to the bound and nothing after it. Only the writer's raw path
// (execRaw) uses them: elsewhere every new text would be prepared again in
// every transaction.

// Mode says whether a parameter of a literal statement may be
// written into its text.
type Mode uint8

const (
	BindValue    Mode = iota // always bound (ids, times, free text)
	InlineValue              // low cardinality: inlined when it can be spelled (see inlinable)
	InlineIfZero             // inlined when it is the zero value ("", 0, false), bound otherwise
)

// maxLiteralVariants bounds the texts of one literal statement (and so the
// statements the writer keeps prepared for it).
const maxLiteralVariants = 64

// maxLiteralLen bounds the length of a string written into a statement;
// longer ones are bound.
const maxLiteralLen = 128

// Literal is a statement with the mode of each of its parameters, and
// the texts made for it so far (its variants: shared by every writer of
// the process, as a text means the same on any connection).
type Literal struct {
	query string   // every value a parameter: the statement run when no variant applies
	parts []string // query split at its parameters (len(modes)+1 parts)
	modes []Mode

	// last is the variant used last: consecutive rows of one agent find
	// it without building a key (most of their values are the very same
	// strings, which compare at once).
	last     atomic.Pointer[literalVariant]
	mu       sync.Mutex
	variants map[string]*literalVariant // by key (appendKey of the inlined values)
	key      []byte                     // scratch for the lookup key, under mu
}

// NewLiteral splits query (whose only question marks are its
// parameters) at its parameters; modes has one entry per parameter.
func NewLiteral(query string, modes ...Mode) *Literal {
	parts := strings.Split(query, "?")
	if len(parts) != len(modes)+1 {
		panic(fmt.Sprintf("literal statement %q: %d parameters, %d modes", firstWords(query), len(parts)-1, len(modes)))
	}
	return &Literal{query: query, parts: parts, modes: modes, variants: map[string]*literalVariant{}}
}

// RepeatLiteral is NewLiteral for a multi-row INSERT: query holds
// rows copies of the row whose parameters' modes are row.
func RepeatLiteral(query string, rows int, row ...Mode) *Literal {
	modes := make([]Mode, 0, rows*len(row))
	for range rows {
		modes = append(modes, row...)
	}
	return NewLiteral(query, modes...)
}

// literalVariant is one text of a literal statement: values[i] is the
// value spelled for parameter i, nil for a parameter it binds.
type literalVariant struct {
	query  string
	values []any
}

// fits reports whether v is the text for args.
func (v *literalVariant) fits(modes []Mode, args []any) bool {
	for i, mode := range modes {
		if mode == BindValue {
			continue
		}
		if spelled := v.values[i]; spelled != nil {
			// A value equal to one spelled is as inlinable as it was. An
			// argument of another type compares unequal without panicking
			// (spelled values are strings, booleans and integers).
			if args[i] != spelled {
				return false
			}
		} else if inlinable(mode, args[i]) {
			return false
		}
	}
	return true
}

// Specialize returns the text to run for args and the args it binds
// (compacted in place: args must be the caller's own slice). Without a
// variant for args' values (none to inline, or the statement has its
// maxLiteralVariants already) it returns the plain statement and args.
func (s *Literal) Specialize(args []any) (string, []any) {
	if len(args) != len(s.modes) {
		return s.query, args // the statement reports the mismatch
	}
	v := s.last.Load()
	if v == nil || !v.fits(s.modes, args) {
		if v = s.find(args); v == nil {
			return s.query, args
		}
		s.last.Store(v)
	}
	bound := args[:0]
	for i, a := range args {
		if v.values[i] == nil {
			bound = append(bound, a)
		}
	}
	return v.query, bound
}

// find returns the variant for args, made if the statement has fewer than
// maxLiteralVariants; nil when it has them all or args has nothing to
// spell.
func (s *Literal) find(args []any) *literalVariant {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := s.key[:0]
	spelled := false
	for i, mode := range s.modes {
		if !inlinable(mode, args[i]) {
			key = append(key, 0)
			continue
		}
		spelled = true
		key = appendKey(key, args[i])
	}
	s.key = key
	if !spelled {
		return nil
	}
	v := s.variants[string(key)]
	if v == nil && len(s.variants) < maxLiteralVariants {
		v = s.variant(args)
		s.variants[string(key)] = v
	}
	return v
}

// variant builds the text that spells args' inlinable values.
func (s *Literal) variant(args []any) *literalVariant {
	v := &literalVariant{values: make([]any, len(args))}
	var b strings.Builder
	b.WriteString(s.parts[0])
	for i, mode := range s.modes {
		if inlinable(mode, args[i]) {
			b.WriteString(literalOf(args[i]))
			v.values[i] = args[i]
		} else {
			b.WriteByte('?')
		}
		b.WriteString(s.parts[i+1])
	}
	v.query = b.String()
	return v
}

// inlinable reports whether mode lets a be written into the text and a
// can be: a string without NUL, valid UTF-8 and at most maxLiteralLen
// long, a bool or an integer. Other types (times, floats) are bound.
func inlinable(mode Mode, a any) bool {
	switch mode {
	case InlineValue:
	case InlineIfZero:
		if !isZeroValue(a) {
			return false
		}
	default:
		return false
	}
	switch v := a.(type) {
	case string:
		return len(v) <= maxLiteralLen && utf8.ValidString(v) && strings.IndexByte(v, 0) < 0
	case bool, int64, int:
		return true
	}
	return false
}

func isZeroValue(a any) bool {
	switch v := a.(type) {
	case string:
		return v == ""
	case int64:
		return v == 0
	case int:
		return v == 0
	case bool:
		return !v
	}
	return false
}

// appendKey appends an inlinable a to a variant's lookup key, tagged with
// its type (the string "1" and the integer 1 are different texts).
func appendKey(key []byte, a any) []byte {
	switch v := a.(type) {
	case string:
		key = append(key, 's')
		key = binary.AppendUvarint(key, uint64(len(v)))
		return append(key, v...)
	case bool:
		if v {
			return append(key, 't')
		}
		return append(key, 'f')
	case int64:
		return binary.AppendVarint(append(key, 'i'), v)
	case int:
		return binary.AppendVarint(append(key, 'i'), int64(v))
	}
	panic(fmt.Sprintf("literal of %T", a)) // inlinable admits no other type
}

// literalOf spells an inlinable a as an SQL literal that SQLite stores
// exactly as it stores a bound a: a string as TEXT, a bool as the integer
// 1 or 0 (as the driver binds it), an integer as INTEGER.
func literalOf(a any) string {
	switch v := a.(type) {
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case bool:
		if v {
			return "1"
		}
		return "0"
	case int64:
		return strconv.FormatInt(v, 10)
	case int:
		return strconv.Itoa(v)
	}
	panic(fmt.Sprintf("literal of %T", a))
}

// Query is the plain statement: every value a parameter.
func (s *Literal) Query() string { return s.query }

// HasVariantWith reports whether one of s's texts holds text (tests).
func (s *Literal) HasVariantWith(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range s.variants {
		if strings.Contains(v.query, text) {
			return true
		}
	}
	return false
}

// firstWords is the start of q, for messages (as models' firstWords).
func firstWords(q string) string {
	f := strings.Fields(q)
	return strings.Join(f[:min(len(f), 3)], " ")
}
