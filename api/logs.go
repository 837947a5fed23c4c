package api

import (
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/logbuf"
)

// The REST operations behind the client's `logs [--follow]` (spec
// "Command-line client", group state).

// LogsFeature serves the gateway's recent log lines (admin only):
//
//	GET /logs?lines=200           {"lines": [...]}
//	GET /logs/stream?lines=<n>    SSE: the last n lines, then each new line as it is logged
type LogsFeature struct {
	Logs *logbuf.Buffer
}

// LogPingInterval is how often an idle log stream sends an SSE comment, so
// that a client that went away is noticed.
var LogPingInterval = 5 * time.Second

// Register implements Feature.
func (f *LogsFeature) Register(r fiber.Router) {
	r.Get("/logs", f.recent)
	r.Get("/logs/stream", f.stream)
}

func (f *LogsFeature) recent(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	n, err := queryInt(c, "lines", 200, 1, 100000)
	if err != nil {
		return err
	}
	lines := f.Logs.Tail(n)
	if lines == nil {
		lines = []string{}
	}
	return c.JSON(fiber.Map{"lines": lines})
}

func (f *LogsFeature) stream(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	n, err := queryInt(c, "lines", 0, 0, 100000)
	if err != nil {
		return err
	}
	tail, sub := f.Logs.Follow(n)
	streamSSE(c, func(out sse) {
		defer sub.Cancel()
		for _, l := range tail {
			out.Data(l)
		}
		if out.Flush() != nil {
			return
		}
		ping := time.NewTicker(LogPingInterval)
		defer ping.Stop()
		for {
			select {
			case l, ok := <-sub.Lines():
				if !ok {
					return
				}
				out.Data(l)
			case <-ping.C:
				out.Comment("ping")
			}
			if out.Flush() != nil {
				return // the client went away
			}
		}
	})
	return nil
}
