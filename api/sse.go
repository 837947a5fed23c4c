package api

import (
	"bufio"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// The one writer of Server-Sent Events (text/event-stream), used by every
// stream: chat replies (chat.go), log lines (logs.go) and the event stream
// (events.go). A frame is a few "field: value" lines closed by a blank
// line; a comment line (": ping") keeps idle connections alive.

// streamSSE answers c as an event stream whose body write produces. The
// body runs after the handler has returned (fasthttp calls it then), for as
// long as write does not return.
func streamSSE(c *fiber.Ctx, write func(sse)) {
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no") // nginx: pass frames on as they come
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) { write(sse{w}) })
}

// sse writes frames into a stream's buffer; Flush sends them. Its methods
// allocate nothing: the chat stream writes one frame per token.
type sse struct{ w *bufio.Writer }

// Data writes a frame of the default event. A text with newlines becomes
// several data lines, which clients join back with "\n".
func (s sse) Data(text string) {
	for {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			break
		}
		s.dataLine(text[:i])
		text = text[i+1:]
	}
	s.dataLine(text)
	s.w.WriteByte('\n')
}

func (s sse) dataLine(line string) {
	s.w.WriteString("data: ")
	s.w.WriteString(line)
	s.w.WriteByte('\n')
}

// Event writes a frame of the named event (clients that only read the
// default event skip it).
func (s sse) Event(name, data string) {
	s.w.WriteString("event: ")
	s.w.WriteString(name)
	s.w.WriteByte('\n')
	s.Data(data)
}

// Frame writes a frame with an id (what a client resumes after, through
// Last-Event-ID), an event name and a one-line data (JSON).
func (s sse) Frame(id int64, name string, data []byte) {
	s.w.WriteString("id: ")
	s.w.WriteString(strconv.FormatInt(id, 10))
	s.w.WriteString("\nevent: ")
	s.w.WriteString(name)
	s.w.WriteString("\ndata: ")
	s.w.Write(data)
	s.w.WriteString("\n\n")
}

// Comment writes a comment frame (": text"), which clients ignore: the
// stream's heartbeat.
func (s sse) Comment(text string) {
	s.w.WriteString(": ")
	s.w.WriteString(text)
	s.w.WriteString("\n\n")
}

// Retry tells the client how long to wait before reconnecting (a line of
// the next frame).
func (s sse) Retry(ms int) {
	s.w.WriteString("retry: ")
	s.w.WriteString(strconv.Itoa(ms))
	s.w.WriteByte('\n')
}

// Flush sends what is buffered; an error means the client went away.
func (s sse) Flush() error { return s.w.Flush() }
