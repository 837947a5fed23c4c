package api

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/detached"
	"github.com/agentryhq/agentry/internal/events"
	"github.com/agentryhq/agentry/internal/fault"
)

// DefaultEventsHeartbeat is how often an idle event stream sends a comment
// line, which keeps proxies from closing it and tells us when the client
// has gone.
const DefaultEventsHeartbeat = 15 * time.Second

// maxTypeFilters bounds the comma-separated type prefixes of one stream.
const maxTypeFilters = 20

// EventsFeature serves GET /events: the event stream as Server-Sent Events
// (docs/events.md).
type EventsFeature struct {
	Bus *events.Bus
	// Heartbeat overrides DefaultEventsHeartbeat.
	Heartbeat time.Duration
}

// Register implements Feature.
func (f *EventsFeature) Register(r fiber.Router) { r.Get("/events", f.stream) }

// stream answers text/event-stream. Each event is one frame:
//
//	id: <event id>
//	event: <type>
//	data: <event JSON>
//
// Query filters: type (comma-separated type prefixes, e.g. "run." or
// "run.finished,task."), task_id, agent_id. Resume: the Last-Event-ID
// header (what EventSource sends on reconnect) or the last_event_id query
// parameter; the stream then starts after that id (0: from the first
// event). Without either it starts with the next new event.
func (f *EventsFeature) stream(c *fiber.Ctx) error {
	if f.Bus == nil {
		return fault.NotEnabled("event stream not available")
	}
	var filter events.Filter
	if raw := strings.TrimSpace(c.Query("type")); raw != "" {
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p != "" {
				filter.TypePrefixes = append(filter.TypePrefixes, p)
			}
		}
		if len(filter.TypePrefixes) > maxTypeFilters {
			return badRequest("type: at most %d comma-separated prefixes", maxTypeFilters)
		}
	}
	if raw := c.Query("task_id"); raw != "" {
		id, ok := parseID(raw)
		if !ok {
			return badRequest("task_id must be a positive integer, got %q", raw)
		}
		filter.TaskID = id
	}
	filter.AgentID = c.Query("agent_id")
	after := int64(-1)
	resume, source := c.Get("Last-Event-ID"), "Last-Event-ID"
	if resume == "" {
		resume, source = c.Query("last_event_id"), "last_event_id"
	}
	if resume = strings.TrimSpace(resume); resume != "" {
		id, ok := parseID(resume)
		if resume == "0" {
			id, ok = 0, true
		}
		if !ok {
			return badRequest("%s must be an event id (a non-negative integer), got %q", source, resume)
		}
		after = id
	}

	// The stream outlives the handler (fasthttp runs the writer after it
	// returns); it ends when the client goes away or the server shuts down.
	ctx, cancel := context.WithCancel(detached.Context(c.UserContext()))
	ch, err := f.Bus.Subscribe(ctx, filter, after)
	if err != nil {
		cancel()
		return err
	}
	shutdown := c.Context().Done()
	heartbeat := f.Heartbeat
	if heartbeat <= 0 {
		heartbeat = DefaultEventsHeartbeat
	}
	streamSSE(c, func(out sse) {
		defer cancel()
		out.Retry(3000)
		out.Comment("connected")
		if out.Flush() != nil {
			return
		}
		ping := time.NewTicker(heartbeat)
		defer ping.Stop()
		for {
			select {
			case <-shutdown:
				return
			case <-ping.C:
				out.Comment("ping")
				if out.Flush() != nil {
					return
				}
			case ev, ok := <-ch:
				if !ok {
					return
				}
				data, err := json.Marshal(ev)
				if err != nil {
					continue
				}
				out.Frame(ev.ID, ev.Type, data)
				if len(ch) > 0 {
					continue // flush once the backlog is written
				}
				if out.Flush() != nil {
					return
				}
			}
		}
	})
	return nil
}
