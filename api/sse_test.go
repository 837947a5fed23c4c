package api

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"
)

func sseBytes(write func(sse)) string {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	write(sse{w})
	w.Flush()
	return b.String()
}

// splitData is the chat stream's data writer before the one SSE writer: a
// line per "\n"-separated piece, then a blank line.
func splitData(text string) string {
	var b strings.Builder
	for _, line := range strings.Split(text, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	return b.String() + "\n"
}

func TestSSEDataLines(t *testing.T) {
	for _, text := range []string{"", "hello", "a\nb", "a\n", "\n", "\n\n", "tail\n\nend", "[DONE]", "é\n\u2028x"} {
		if got, want := sseBytes(func(s sse) { s.Data(text) }), splitData(text); got != want {
			t.Errorf("Data(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestSSEFrames(t *testing.T) {
	for _, tc := range []struct {
		write func(sse)
		want  string
	}{
		{func(s sse) { s.Event("error", "boom\nagain") }, "event: error\ndata: boom\ndata: again\n\n"},
		{func(s sse) { s.Event("done", `{"run_id":"r1"}`) }, "event: done\ndata: {\"run_id\":\"r1\"}\n\n"},
		{func(s sse) { s.Frame(42, "run.finished", []byte(`{"id":42}`)) }, "id: 42\nevent: run.finished\ndata: {\"id\":42}\n\n"},
		{func(s sse) { s.Comment("ping") }, ": ping\n\n"},
		{func(s sse) { s.Retry(3000); s.Comment("connected") }, "retry: 3000\n: connected\n\n"},
	} {
		if got := sseBytes(tc.write); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

// TestSSEDataAllocatesNothing: the chat stream writes a frame per token.
func TestSSEDataAllocatesNothing(t *testing.T) {
	s := sse{bufio.NewWriterSize(io.Discard, 4096)}
	token := "a token\nwith a newline"
	if n := testing.AllocsPerRun(1000, func() { s.Data(token); _ = s.Flush() }); n != 0 {
		t.Fatalf("Data allocates %v times per frame", n)
	}
}

func BenchmarkSSEData(b *testing.B) {
	s := sse{bufio.NewWriterSize(io.Discard, 4096)}
	b.ReportAllocs()
	for b.Loop() {
		s.Data(" token")
	}
}
