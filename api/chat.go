package api

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"unsafe"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/hangup"
	"github.com/agentryhq/agentry/internal/llm"
	"github.com/agentryhq/agentry/internal/scrub"
)

// ChatFeature serves chat, chat streaming, feedback and the learning list.
type ChatFeature struct {
	Chat *chat.Service
	// Hangups cancels the run of a caller that disconnects (nil: only a
	// failed stream write notices).
	Hangups *hangup.Watcher
}

// Register implements Feature.
func (f *ChatFeature) Register(r fiber.Router) {
	r.Post("/chat", f.chat)
	r.Post("/chat/stream", f.stream)
	r.Post("/chat/feedback", f.feedback)
	r.Get("/learning/feedback", f.learning)
}

// chatBody is the spec's Chat request (plus an optional session_id to
// continue a known session, and confirm_cost for the confirmation flow).
type chatBody struct {
	AgentID     string          `json:"agent_id" maxlen:"100"`
	Text        string          `json:"text"`
	UserID      string          `json:"user_id" maxlen:"191"`
	Username    string          `json:"username" maxlen:"191"`
	SessionID   string          `json:"session_id" maxlen:"191"`
	Overrides   *chat.Overrides `json:"overrides"`
	ConfirmCost bool            `json:"confirm_cost"`
}

func (b chatBody) request(source string) chat.Request {
	return chat.Request{AgentID: b.AgentID, Text: b.Text, UserID: b.UserID, Username: b.Username, SessionID: b.SessionID,
		Overrides: b.Overrides, Source: source, Interactive: true, ConfirmCost: b.ConfirmCost}
}

func (f *ChatFeature) chat(c *fiber.Ctx) error {
	var b chatBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	// A caller that hangs up cancels the provider call; the run is
	// recorded cancelled and its exchange is not kept.
	ctx, stop := f.Hangups.Watch(c.UserContext(), c.Context().Conn())
	defer stop()
	reply, err := f.Chat.Chat(ctx, b.request(llm.SourceChat), nil)
	if err != nil {
		return err
	}
	setRunHeaders(c, reply.SessionID, reply.RunID, reply.ResponseID)
	return c.JSON(reply)
}

// Response headers naming a chat run (both chat routes send them).
const (
	HeaderSessionID  = "X-Agentry-Session-Id"
	HeaderRunID      = "X-Agentry-Run-Id"
	HeaderResponseID = "X-Agentry-Response-Id"
)

func setRunHeaders(c *fiber.Ctx, sessionID, runID, responseID string) {
	setHeader(c, sessionIDKey, sessionID)
	setHeader(c, runIDKey, runID)
	setHeader(c, responseIDKey, responseID)
}

// The run headers' names as fasthttp stores them (already canonical).
var sessionIDKey, runIDKey, responseIDKey = []byte(HeaderSessionID), []byte(HeaderRunID), []byte(HeaderResponseID)

// setHeader sets a response header whose canonical name is key. fiber's
// Set copies and normalizes the name and copies the value to replace line
// breaks on every call (1.7 % of the gateway's CPU for the run headers); a
// value without line breaks, the usual one, is stored as it is, with the
// same result.
func setHeader(c *fiber.Ctx, key []byte, value string) {
	if strings.ContainsAny(value, "\r\n") {
		c.Set(string(key), value) // replaces them
		return
	}
	c.Response().Header.SetCanonical(key, unsafe.Slice(unsafe.StringData(value), len(value))) // copied, not kept
}

// stream answers text/event-stream: `data: <chunk>` lines as the provider
// produces text, then `data: [DONE]`. Every data line of the default event
// is reply text, so a client that joins them shows the reply and nothing
// else. The run's ids travel in the X-Agentry-* response headers; with
// ?meta=true the stream also ends with a named `event: done` frame
// carrying them as JSON (plain clients skip named events).
//
// The response is committed only when the first text arrives (or the run
// ends): everything that fails before that — bad input, an unknown agent,
// a cost rejection (402/403/409/429/503), an unreachable provider — is
// answered with its HTTP status and the JSON envelope, like POST /chat. A
// failure after the stream started sends an `event: error` frame (its data
// is the error text; JSON with the code under ?meta=true), then [DONE].
// A client that disconnects cancels the provider call: the run is recorded
// cancelled, the ledger row cancelled with the usage so far, and the
// exchange is not added to the conversation.
func (f *ChatFeature) stream(c *fiber.Ctx) error {
	var b chatBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	meta := c.QueryBool("meta")
	req := b.request(llm.SourceStream)
	ctx := c.UserContext()
	if _, _, err := f.Chat.Prepare(ctx, &req); err != nil {
		return err
	}
	req.RunID, req.ResponseID = chat.NewRunIDs()
	sessionID := chat.SessionOf(ctx, &req)
	// The run outlives this handler (fasthttp runs the body writer after it
	// returns): detach it from the request, keeping the caller; the hangup
	// watch (stopped when the body is written) cancels it if the client
	// goes away.
	runCtx, stop := f.Hangups.Watch(auth.WithPrincipal(detached.Context(ctx), auth.FromContext(ctx)), c.Context().Conn())
	run := startStreamRun(runCtx, f.Chat, req)
	select {
	case <-run.started:
	case res := <-run.done:
		if res.err != nil {
			stop()
			return res.err
		}
		run.done <- res // a run without any text: stream just the end frames
	}
	setRunHeaders(c, sessionID, req.RunID, req.ResponseID)
	streamSSE(c, func(out sse) {
		defer stop()
		res, ok := run.forward(out, stop, func(out sse, text string) { out.Data(text) })
		if !ok {
			return // the client went away
		}
		if res.err != nil {
			frame := map[string]string{"error": "internal error"}
			if e := faultError(res.err); e != nil {
				frame["error"] = scrub.String(e.Message)
				if e.Code != "" {
					frame["code"] = e.Code
				}
			}
			if meta {
				payload, _ := json.Marshal(frame)
				out.Event("error", string(payload))
			} else {
				out.Event("error", frame["error"])
			}
		} else if meta {
			ids, _ := json.Marshal(res.reply)
			out.Event("done", string(ids))
		}
		out.Data("[DONE]")
		_ = out.Flush()
	})
	return nil
}

// streamRun is a chat run whose text chunks flow through a channel, so the
// handler can wait for the first one before committing the response.
type streamRun struct {
	deltas  chan string
	started chan struct{} // closed at the first chunk
	done    chan streamResult
}

type streamResult struct {
	reply *chat.Reply
	err   error
}

func startStreamRun(ctx context.Context, svc *chat.Service, req chat.Request) *streamRun {
	r := &streamRun{deltas: make(chan string, 64), started: make(chan struct{}), done: make(chan streamResult, 1)}
	var first sync.Once
	go func() {
		reply, err := svc.Chat(ctx, req, func(text string) error {
			first.Do(func() { close(r.started) })
			select {
			case r.deltas <- text:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		r.done <- streamResult{reply, err}
	}()
	return r
}

// forward writes chunks as they come (each through emit) until the run
// ends; ok is false when a write failed (the client disconnected; the run
// is cancelled).
func (r *streamRun) forward(out sse, cancel func(), emit func(sse, string)) (res streamResult, ok bool) {
	write := func(text string) bool {
		emit(out, text)
		if err := out.Flush(); err != nil {
			cancel()
			return false
		}
		return true
	}
	for {
		select {
		case text := <-r.deltas:
			if !write(text) {
				<-r.done
				return streamResult{}, false
			}
		case res := <-r.done:
			// Every chunk was queued before the run returned: flush the rest.
			for {
				select {
				case text := <-r.deltas:
					if !write(text) {
						return streamResult{}, false
					}
				default:
					return res, true
				}
			}
		}
	}
}

func (f *ChatFeature) feedback(c *fiber.Ctx) error {
	var b chat.FeedbackRequest
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	res, err := f.Chat.Feedback(c.UserContext(), b)
	if err != nil {
		return err
	}
	return c.JSON(res)
}

func (f *ChatFeature) learning(c *fiber.Ctx) error {
	if err := Require(c, auth.PermMemoryRead); err != nil {
		return err
	}
	limit, err := queryInt(c, "limit", 50, 1, 500)
	if err != nil {
		return err
	}
	entries, err := f.Chat.ListFeedback(c.UserContext(), c.Query("agent_id"), limit)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"feedback": entries, "count": len(entries)})
}
