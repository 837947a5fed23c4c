package fakellm

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
)

// conversation is a request in format-neutral terms.
type conversation struct {
	format       string
	model        string
	stream       bool
	includeUsage bool // OpenAI sends the usage chunk only when asked
	maxTokens    int
	messages     []normMessage
	tools        []string
	lastText     string // last user or tool message: what rules match
	lastUser     string // last user message: what the echo repeats
	textLen      int    // characters of all message text, for the usage estimate
}

// normMessage is one message as the digest sees it, so the same conversation has the same digest
// in every wire format.
type normMessage struct {
	Role       string     `json:"role"`
	Content    string     `json:"content,omitempty"`
	ToolCalls  []normCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

type normCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

func (c *conversation) add(m normMessage) {
	c.messages = append(c.messages, m)
	c.textLen += len(m.Content)
	for _, tc := range m.ToolCalls {
		c.textLen += len(tc.Name) + len(tc.Arguments)
	}
	switch m.Role {
	case "user":
		c.lastUser, c.lastText = m.Content, m.Content
	case "tool":
		c.lastText = m.Content
	}
}

func (c *conversation) digest() string {
	raw, _ := json.Marshal(c.messages)
	sum := sha256.Sum256(raw)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// compactJSON gives tool arguments one spelling whatever the format sent (a string holding JSON for
// OpenAI, an object for Anthropic and Ollama).
func compactJSON(raw []byte) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			raw = []byte(s)
		}
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		return buf.String()
	}
	return string(raw)
}

// textOf reads content that is either a string or an array of blocks with text (OpenAI content
// parts, Anthropic blocks).
func textOf(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var b bytes.Buffer
		for _, bl := range blocks {
			if bl.Type == "text" || bl.Type == "" {
				b.WriteString(bl.Text)
			}
		}
		return b.String()
	}
	return ""
}

// eventWriter writes a streamed answer event by event, flushing each, and breaks the connection where
// the answer says to cut.
type eventWriter struct {
	w          http.ResponseWriter
	flusher    http.Flusher
	a          *answer
	sent       int  // content chunks sent
	cutNow     bool // the stream was cut by script
	chunkDelay time.Duration
	done       <-chan struct{}
}

func newEventWriter(w http.ResponseWriter, r *http.Request, a *answer) *eventWriter {
	f, _ := w.(http.Flusher)
	return &eventWriter{w: w, flusher: f, a: a, chunkDelay: time.Duration(a.rule.ChunkDelay), done: r.Context().Done()}
}

// Kinds of streamed events, for cutting streams at the right place.
const (
	evFrame   = iota // opening and framing events (message_start, role chunk, block start/stop, ping)
	evContent        // events carrying text or tool-call pieces: the "chunks" of cut_after_chunks
	evFinal          // finish reason, usage and end-of-stream events
)

// shouldCut tells whether the next event must not be sent: in a cut stream, every final event, and
// any content event once CutAfterChunks were sent.
func (e *eventWriter) shouldCut(kind int) bool {
	if !e.a.cut() {
		return false
	}
	return kind == evFinal || (kind == evContent && e.sent >= e.a.rule.CutAfterChunks)
}

// write sends one event. It returns false when the stream is cut here or the client went away, and
// the caller stops writing.
func (e *eventWriter) write(kind int, payload []byte) bool {
	if e.shouldCut(kind) {
		e.cutNow = true
		return false
	}
	if _, err := e.w.Write(payload); err != nil {
		return false
	}
	if e.flusher != nil {
		e.flusher.Flush()
	}
	if kind == evContent {
		e.sent++
		if e.chunkDelay > 0 {
			t := time.NewTimer(e.chunkDelay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-e.done:
				return false
			}
		}
	}
	return true
}

func sse(event string, v any) []byte {
	raw, _ := json.Marshal(v)
	var b bytes.Buffer
	if event != "" {
		b.WriteString("event: ")
		b.WriteString(event)
		b.WriteByte('\n')
	}
	b.WriteString("data: ")
	b.Write(raw)
	b.WriteString("\n\n")
	return b.Bytes()
}

func ndjson(v any) []byte {
	raw, _ := json.Marshal(v)
	return append(raw, '\n')
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
