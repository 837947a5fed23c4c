package apiclient

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// Event is one Server-Sent Event.
type Event struct {
	// Name is the event: field ("" for plain data events).
	Name string
	// Data is the data lines joined with "\n".
	Data string
}

// StreamError is an `event: error` frame of a stream.
type StreamError struct{ Message string }

func (e *StreamError) Error() string { return e.Message }

// stream reads the SSE answer of a generated call (made with c.stream,
// which has no overall timeout) and calls onEvent for each event as it
// arrives, until the stream ends, ctx ends, or onEvent returns an error
// (returned; io.EOF from onEvent ends quietly). A 4xx/5xx answer before
// the stream starts is an *APIError.
func (c *Client) readStream(ctx context.Context, resp *http.Response, err error, onEvent func(Event) error) error {
	if err != nil {
		return c.sendError(ctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		raw, _ := io.ReadAll(resp.Body)
		return decodeError(resp.StatusCode, raw)
	}
	err = ReadEvents(resp.Body, onEvent)
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// ChatStream streams a reply: onDelta gets each text chunk as it arrives.
// It returns the ids of the run (from the done frame, when the gateway
// sends one) or a *StreamError when the run failed mid-stream.
func (c *Client) ChatStream(ctx context.Context, req ChatRequest, onDelta func(string) error) (*ChatReply, error) {
	var done ChatReply
	var streamErr error
	finished := false
	meta := true
	resp, err := c.stream.PostChatStream(ctx, &openapi.PostChatStreamParams{Meta: &meta}, req)
	err = c.readStream(ctx, resp, err, func(ev Event) error {
		switch ev.Name {
		case "error":
			var env struct {
				Error string `json:"error"`
			}
			if json.Unmarshal([]byte(ev.Data), &env) != nil || env.Error == "" {
				env.Error = ev.Data
			}
			streamErr = &StreamError{Message: env.Error}
			return nil
		case "done":
			done.setRaw([]byte(ev.Data))
			_ = json.Unmarshal([]byte(ev.Data), &done)
			return nil
		case "", "message":
			if ev.Data == "[DONE]" {
				finished = true
				return io.EOF
			}
			return onDelta(ev.Data)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if streamErr != nil {
		return nil, streamErr
	}
	if !finished {
		return nil, &StreamError{Message: "the stream ended before [DONE]; the reply may be incomplete"}
	}
	return &done, nil
}

// FollowLogs prints the last `lines` lines and then each new one until ctx ends.
func (c *Client) FollowLogs(ctx context.Context, lines int, onLine func(string) error) error {
	n := int64(lines)
	resp, err := c.stream.GetLogsStream(ctx, &openapi.GetLogsStreamParams{Lines: &n})
	return c.readStream(ctx, resp, err, func(ev Event) error { return onLine(ev.Data) })
}

// ReadEvents parses an SSE stream (comments and id/retry fields ignored).
func ReadEvents(r io.Reader, onEvent func(Event) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev Event
	var data []string
	has := false
	flush := func() error {
		if !has {
			return nil
		}
		ev.Data = strings.Join(data, "\n")
		err := onEvent(ev)
		ev, data, has = Event{}, nil, false
		return err
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if err := flush(); err != nil {
				return err
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event:"):
			ev.Name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			has = true
		case strings.HasPrefix(line, "data:"):
			v := strings.TrimPrefix(line, "data:")
			v = strings.TrimPrefix(v, " ")
			data = append(data, v)
			has = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read stream: %w", err)
	}
	return flush()
}
