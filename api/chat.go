package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/internal/llm"
)

// ChatFeature serves chat, chat streaming, feedback and the learning list.
type ChatFeature struct {
	Chat *chat.Service
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
	AgentID     string          `json:"agent_id"`
	Text        string          `json:"text"`
	UserID      string          `json:"user_id"`
	Username    string          `json:"username"`
	SessionID   string          `json:"session_id"`
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
	reply, err := f.Chat.Chat(c.UserContext(), b.request(llm.SourceChat), nil)
	if err != nil {
		return err
	}
	return c.JSON(reply)
}

// stream answers text/event-stream: `data: <chunk>` lines as the provider
// produces text, then `data: [DONE]`. Bad requests are refused with a JSON
// 4xx before the stream starts. A failure mid-stream sends an `event: error`
// frame with the envelope, then [DONE]. A client that disconnects cancels
// the provider call (the write fails and the run's context is cancelled).
func (f *ChatFeature) stream(c *fiber.Ctx) error {
	var b chatBody
	if err := decodeJSON(c, &b); err != nil {
		return err
	}
	req := b.request(llm.SourceStream)
	ctx := c.UserContext()
	if _, _, err := f.Chat.Prepare(ctx, &req); err != nil {
		return err
	}
	// fasthttp runs the writer after the handler returns: keep what it needs.
	ctx = auth.WithPrincipal(context.WithoutCancel(ctx), auth.FromContext(ctx))
	c.Set(fiber.HeaderContentType, "text/event-stream")
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderConnection, "keep-alive")
	c.Set("X-Accel-Buffering", "no")
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		var writeErr error
		onDelta := func(text string) error {
			if writeErr != nil {
				return writeErr
			}
			writeData(w, text)
			if writeErr = w.Flush(); writeErr != nil {
				cancel()
				return fmt.Errorf("client went away: %w", writeErr)
			}
			return nil
		}
		reply, err := f.Chat.Chat(ctx, req, onDelta)
		if writeErr != nil {
			return
		}
		if err != nil {
			e := f.MapError(err)
			frame := map[string]string{"error": "internal error"}
			if e != nil {
				frame["error"] = e.Message
				if e.Code != "" {
					frame["code"] = e.Code
				}
			}
			payload, _ := json.Marshal(frame)
			fmt.Fprintf(w, "event: error\ndata: %s\n\n", payload)
		} else {
			ids, _ := json.Marshal(reply)
			fmt.Fprintf(w, "event: done\ndata: %s\n\n", ids)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
		_ = w.Flush()
	})
	return nil
}

// writeData writes one SSE event; a chunk with newlines becomes several
// data lines, which clients join back with "\n".
func writeData(w *bufio.Writer, text string) {
	for _, line := range strings.Split(text, "\n") {
		w.WriteString("data: ")
		w.WriteString(line)
		w.WriteByte('\n')
	}
	w.WriteByte('\n')
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

// MapError implements Feature: domain errors of chat and of the providers.
func (f *ChatFeature) MapError(err error) *Error {
	// Cost rejections (api/costs.go) first: the stream's error frame uses
	// this mapper alone.
	if e := mapCostError(err); e != nil {
		return e
	}
	var inv *chat.InvalidError
	var forb *chat.ForbiddenError
	var pe *llm.ProviderError
	switch {
	case errors.As(err, &inv):
		return &Error{Status: fiber.StatusBadRequest, Message: inv.Error(), Code: "invalid", Fields: map[string]any{"field": inv.Field}}
	case errors.As(err, &forb):
		return &Error{Status: fiber.StatusForbidden, Message: forb.Msg, Code: forb.Code}
	case errors.Is(err, chat.ErrAgentNotFound), errors.Is(err, chat.ErrSessionNotFound), errors.Is(err, chat.ErrResponseNotFound):
		return &Error{Status: fiber.StatusNotFound, Message: err.Error(), Code: "not_found"}
	case errors.Is(err, chat.ErrAgentDisabled):
		return &Error{Status: fiber.StatusConflict, Message: err.Error(), Code: "agent_disabled"}
	case errors.As(err, &pe):
		return &Error{Status: fiber.StatusBadGateway, Message: pe.Error(), Code: "provider_error", Fields: map[string]any{"provider": pe.Provider}}
	case errors.Is(err, llm.ErrUnknownProvider):
		return &Error{Status: fiber.StatusBadRequest, Message: err.Error(), Code: "invalid"}
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Status: fiber.StatusGatewayTimeout, Message: "the agent did not answer in time", Code: "timeout"}
	}
	return nil
}
