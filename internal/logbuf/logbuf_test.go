package logbuf

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestTailKeepsNewestLines(t *testing.T) {
	b := New(3)
	if got := b.Tail(10); len(got) != 0 {
		t.Fatalf("empty buffer tail = %v", got)
	}
	for i := 1; i <= 5; i++ {
		fmt.Fprintf(b, "line %d\n", i)
	}
	got := b.Tail(10)
	want := []string{"line 3", "line 4", "line 5"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("tail = %v, want %v", got, want)
	}
	if got := b.Tail(2); strings.Join(got, ",") != "line 4,line 5" {
		t.Fatalf("tail(2) = %v", got)
	}
}

func TestTeeWritesBothAndRedacts(t *testing.T) {
	var inner bytes.Buffer
	buf := New(10)
	log := slog.New(NewHandler(slog.NewTextHandler(&inner, &slog.HandlerOptions{Level: slog.LevelInfo}), buf))
	log.Debug("hidden at info level")
	log.With("component", "test").Info("hello", "api_key", "sk-very-secret", "input_tokens", 42)
	lines := buf.Tail(0)
	if len(lines) != 1 {
		t.Fatalf("buffer lines = %q, want 1 (debug filtered like the inner handler)", lines)
	}
	if !strings.Contains(lines[0], "msg=hello") || !strings.Contains(lines[0], "component=test") {
		t.Fatalf("line = %q", lines[0])
	}
	if strings.Contains(lines[0], "sk-very-secret") {
		t.Fatalf("secret leaked into buffer: %q", lines[0])
	}
	if !strings.Contains(lines[0], "input_tokens=42") {
		t.Fatalf("token count redacted: %q", lines[0])
	}
	if !strings.Contains(inner.String(), "msg=hello") {
		t.Fatalf("inner handler did not get the record: %q", inner.String())
	}
}

func TestFollowSeesLinesAfterTailOnce(t *testing.T) {
	b := New(100)
	fmt.Fprintln(b, "old")
	tail, sub := b.Follow(5)
	if strings.Join(tail, ",") != "old" {
		t.Fatalf("tail = %v", tail)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var got []string
	go func() {
		defer wg.Done()
		for l := range sub.Lines() {
			got = append(got, l)
		}
	}()
	fmt.Fprintln(b, "new 1")
	fmt.Fprintln(b, "new 2")
	b.EndStreams()
	wg.Wait()
	if strings.Join(got, ",") != "new 1,new 2" {
		t.Fatalf("followed = %v", got)
	}
	sub.Cancel() // after EndStreams: no panic
	_, late := b.Follow(0)
	if _, open := <-late.Lines(); open {
		t.Fatal("subscription after EndStreams should be closed")
	}
}

func TestSlowFollowerDropsInsteadOfBlocking(t *testing.T) {
	b := New(10)
	_, sub := b.Follow(0)
	defer sub.Cancel()
	for i := 0; i < subscriberQueue+10; i++ {
		fmt.Fprintf(b, "l%d\n", i)
	}
	if sub.Dropped() != 10 {
		t.Fatalf("dropped = %d, want 10", sub.Dropped())
	}
}
