package fault

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

func TestSentinelWrappedKeepsItsIdentityAndTellsTheWholeText(t *testing.T) {
	errGone := NotFound("agent not found")
	err := fmt.Errorf("%w: bot", errGone)
	if !errors.Is(err, errGone) {
		t.Fatal("errors.Is lost the sentinel")
	}
	f, ok := As(err)
	if !ok {
		t.Fatal("no fault found")
	}
	d := f.Fault()
	if d.Kind != KindNotFound || d.Code != CodeNotFound || d.Message != "" || d.Fields != nil || d.RetryAfter != 0 {
		t.Fatalf("detail = %+v (an empty message takes the whole text)", d)
	}
}

func TestOpaqueErrorHidesWhatItWraps(t *testing.T) {
	err := fmt.Errorf("start run of task 1: %w: %w", ErrTemporalUnavailable, errors.New("dial tcp: refused"))
	d := must(t, err)
	if d.Kind != KindUnavailable || d.Code != CodeTemporalUnavailable || d.RetryAfter != TemporalRetry ||
		d.Message != "the workflow engine (Temporal) is unavailable; try again shortly" {
		t.Fatalf("detail = %+v", d)
	}
}

func TestErrorFieldsAreCopied(t *testing.T) {
	sentinel := &Error{Kind: KindInvalid, Code: CodeInvalid, Msg: "bad", Field: "source", Fields: map[string]any{"job_id": "j1"}}
	d := sentinel.Fault()
	want := map[string]any{"field": "source", "job_id": "j1"}
	if !reflect.DeepEqual(d.Fields, want) {
		t.Fatalf("fields = %v, want %v", d.Fields, want)
	}
	d.Fields["field"] = "changed"
	if sentinel.Fault().Fields["field"] != "source" || len(sentinel.Fields) != 1 {
		t.Fatal("a caller's change of the detail reached the shared sentinel")
	}
}

func TestErrorUnwrapsToItsSentinel(t *testing.T) {
	marker := errors.New("invalid day")
	err := fmt.Errorf("run now: %w", &Error{Kind: KindInvalid, Code: CodeInvalid, Field: "day", Msg: "x is not a date", Err: marker})
	if !errors.Is(err, marker) {
		t.Fatal("errors.Is(err, marker) does not hold")
	}
	if got := errors.Unwrap(err).Error(); got != "x is not a date" {
		t.Fatalf("text = %q: the marker is not part of the text", got)
	}
}

func TestInvalid(t *testing.T) {
	for _, tc := range []struct {
		in     *Invalid
		text   string
		fields map[string]any
	}{
		{&Invalid{Field: "text", Msg: "is required"}, "text: is required", map[string]any{"field": "text"}},
		{&Invalid{Msg: "secret value is empty"}, "secret value is empty", nil},
	} {
		d := must(t, fmt.Errorf("context: %w", tc.in))
		if tc.in.Error() != tc.text || d.Kind != KindInvalid || d.Code != CodeInvalid || d.Message != tc.text || !reflect.DeepEqual(d.Fields, tc.fields) {
			t.Errorf("%+v: text %q, detail %+v", tc.in, tc.in.Error(), d)
		}
	}
}

func TestForbidden(t *testing.T) {
	d := must(t, &Forbidden{Code: "policy", Msg: "https only"})
	if d.Kind != KindForbidden || d.Code != "policy" || d.Message != "https only" {
		t.Fatalf("detail = %+v", d)
	}
}

// A domain type with context of its own implements Fault itself; the
// outermost fault of a chain is the one the caller is told.
type decided struct{ id int }

func (e *decided) Error() string { return fmt.Sprintf("approval %d is already decided", e.id) }
func (e *decided) Fault() Detail {
	return Detail{Kind: KindConflict, Code: "approval_decided", Message: e.Error(), Fields: map[string]any{"approval_id": e.id}}
}

// kindOf is the kind of the first fault in err's chain, or 0.
func kindOf(err error) Kind {
	if f, ok := As(err); ok {
		return f.Fault().Kind
	}
	return 0
}

func TestDomainTypeAndOutermostWins(t *testing.T) {
	err := fmt.Errorf("decide: %w", &decided{id: 7})
	if kindOf(err) != KindConflict {
		t.Fatalf("kind = %v", kindOf(err))
	}
	inner := fmt.Errorf("%w: %w", NotEnabled("off"), &decided{id: 1})
	if kindOf(inner) != KindUnavailable {
		t.Fatalf("kind = %v, want the outermost (unavailable)", kindOf(inner))
	}
	if kindOf(errors.New("plain")) != 0 {
		t.Fatal("a plain error has a kind")
	}
}

func TestConstructors(t *testing.T) {
	for _, tc := range []struct {
		err  *Error
		kind Kind
		code string
	}{
		{NotFound("x"), KindNotFound, "not_found"},
		{Conflict("agent_disabled", "x"), KindConflict, "agent_disabled"},
		{NotEnabled("x"), KindUnavailable, "not_enabled"},
		{TemporalUnavailable("x"), KindUnavailable, "temporal_unavailable"},
		{New(KindTimeout, "timeout", "x"), KindTimeout, "timeout"},
	} {
		d := tc.err.Fault()
		if d.Kind != tc.kind || d.Code != tc.code || tc.err.Error() != "x" {
			t.Errorf("%+v: detail %+v", tc.err, d)
		}
	}
	if d := TemporalUnavailable("x").Fault(); d.RetryAfter != 5*time.Second || d.Message != "x" {
		t.Errorf("temporal unavailable: %+v", d)
	}
}

func TestKindNames(t *testing.T) {
	seen := map[string]bool{}
	for k := KindInvalid; k <= KindTimeout; k++ {
		name := k.String()
		if name == "unknown" || seen[name] {
			t.Errorf("kind %d: name %q", k, name)
		}
		seen[name] = true
	}
	if Kind(0).String() != "unknown" || Kind(200).String() != "unknown" {
		t.Error("out-of-range kinds have names")
	}
}

func must(t *testing.T, err error) Detail {
	t.Helper()
	f, ok := As(err)
	if !ok {
		t.Fatalf("%v: no fault", err)
	}
	return f.Fault()
}
