package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/internal/telemetry"
	"github.com/agentryhq/agentry/internal/textcut"
	"github.com/agentryhq/agentry/models"
)

// storageFullRetry is the Retry-After of writes refused because the
// database is out of space: freeing space is a person's job, so a client
// should not come back at once.
const storageFullRetry = 60 * time.Second

// databaseRetry is the Retry-After of a request that failed because the
// database did not answer: a restart or failover takes seconds.
const databaseRetry = 5 * time.Second

// Error is an API error: the status code and the envelope {"error": ...},
// optionally with a machine-readable code and context fields.
type Error struct {
	Status  int
	Message string
	Code    string
	Fields  map[string]any
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// Errf builds an Error with a formatted message.
func Errf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// WithCode sets the machine-readable code.
func (e *Error) WithCode(code string) *Error { e.Code = code; return e }

// With adds a context field to the envelope.
func (e *Error) With(key string, v any) *Error {
	if e.Fields == nil {
		e.Fields = map[string]any{}
	}
	e.Fields[key] = v
	return e
}

// Common errors.
func badRequest(format string, args ...any) *Error {
	return Errf(fiber.StatusBadRequest, format, args...)
}
func notFound(format string, args ...any) *Error { return Errf(fiber.StatusNotFound, format, args...) }

// errorHandler renders every error, ours or Fiber's, as the envelope.
// Unexpected errors are logged and answered with a generic 500 so internal
// details (paths, SQL) never reach the caller.
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	var apiErr *Error
	var fe *fiber.Error
	switch {
	case errors.As(err, &apiErr):
	case errors.As(err, &fe):
		apiErr = &Error{Status: fe.Code, Message: fiberMessage(fe), Code: fiberCode(fe.Code)}
	case models.IsStorageFull(err):
		// Not a bare 500: the caller learns what is wrong and when to come
		// back; /health says the same (decisions.md, "Full disk").
		s.log.Error("request failed: database out of space", "method", c.Method(), "path", c.Path())
		if s.deps.StorageFull != nil {
			s.deps.StorageFull()
		}
		apiErr = &Error{Status: fiber.StatusInsufficientStorage, Message: models.ErrStorageFull.Error(),
			Code: "storage_full", RetryAfter: storageFullRetry}
	default:
		if apiErr = faultError(err); apiErr == nil && models.IsDatabaseUnavailable(err) {
			// PostgreSQL stopped or cut off: it is usually back within
			// seconds and the pool reconnects by itself (decisions.md,
			// "PostgreSQL outage"). After faultError, so a provider or
			// Temporal that refused a connection keeps its own answer. The
			// log keeps the driver's words, the caller a fixed text.
			s.log.Warn("request failed: database unavailable", "method", c.Method(), "path", c.Path(), "err", err)
			apiErr = &Error{Status: fiber.StatusServiceUnavailable, Message: models.ErrDatabaseUnavailable.Error(),
				Code: "database_unavailable", RetryAfter: databaseRetry}
		} else if apiErr == nil {
			s.log.Error("request failed", "method", c.Method(), "path", c.Path(), "err", err)
			apiErr = &Error{Status: fiber.StatusInternalServerError, Message: "internal error"}
		} else if apiErr.Code == fault.CodeTemporalUnavailable && apiErr.Message != err.Error() {
			// The envelope hid the Temporal client's error: the log keeps it.
			s.log.Warn("request failed: Temporal unavailable", "method", c.Method(), "path", c.Path(), "err", err)
		}
	}
	// The envelope is a chokepoint: error texts may quote a provider, an MCP
	// server or a webhook receiver, so secrets are removed here whatever the
	// handler built.
	body := fiber.Map{"error": capMessage(scrub.String(apiErr.Message))}
	if apiErr.Code != "" {
		body["code"] = apiErr.Code
		c.Locals(localErrorCode, apiErr.Code)
	}
	if tid := telemetry.TraceID(c.UserContext()); tid != "" {
		body["trace_id"] = tid
	}
	for k, v := range apiErr.Fields {
		if k != "error" && k != "code" {
			body[k] = scrub.Value(v)
		}
	}
	status := apiErr.Status
	if isOpenAIPath(c.Path()) {
		// OpenAI's envelope, which its SDKs parse (api/openai.go).
		status, body = openAIError(c, apiErr)
	}
	if apiErr.Status == fiber.StatusRequestEntityTooLarge {
		// fasthttp closes the connection after this answer: drain the
		// body still arriving so the client reads the 413 (api/linger.go).
		markLinger(c.Context().Conn())
	}
	if apiErr.RetryAfter > 0 {
		secs := int(apiErr.RetryAfter.Round(time.Second) / time.Second)
		if secs < 1 {
			secs = 1
		}
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
	}
	return c.Status(status).JSON(body)
}

// maxMessage bounds the error text of an answer. Messages quote the value
// they refuse ("source %q ..."), so a 3 MB value made a 3 MB error answer
// (found by dev/probe); the start of the value is enough to recognise it.
const maxMessage = 1024

// capMessage cuts msg to maxMessage bytes on a rune boundary.
func capMessage(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	kept := textcut.Prefix(msg, maxMessage)
	return kept + fmt.Sprintf("… (%d bytes cut)", len(msg)-len(kept))
}

func fiberMessage(fe *fiber.Error) string {
	switch fe.Code {
	case fiber.StatusRequestEntityTooLarge:
		return "request body too large"
	case fiber.StatusNotFound:
		return "no such route"
	case fiber.StatusMethodNotAllowed:
		return "method not allowed"
	}
	return fe.Message
}

func fiberCode(status int) string {
	switch status {
	case fiber.StatusRequestEntityTooLarge:
		return "too_large"
	case fiber.StatusNotFound:
		return "not_found"
	case fiber.StatusMethodNotAllowed:
		return "method_not_allowed"
	case fiber.StatusBadRequest:
		return "invalid"
	}
	return ""
}

// kindStatus is the HTTP status of each kind of the fault vocabulary
// (ARCHITECTURE.md, "Error envelope").
var kindStatus = [...]int{
	fault.KindInvalid:     fiber.StatusBadRequest,
	fault.KindBudget:      fiber.StatusPaymentRequired,
	fault.KindForbidden:   fiber.StatusForbidden,
	fault.KindNotFound:    fiber.StatusNotFound,
	fault.KindConflict:    fiber.StatusConflict,
	fault.KindOverloaded:  fiber.StatusTooManyRequests,
	fault.KindUpstream:    fiber.StatusBadGateway,
	fault.KindUnavailable: fiber.StatusServiceUnavailable,
	fault.KindTimeout:     fiber.StatusGatewayTimeout,
}

// errTimeout is a request whose deadline passed before the agent answered.
var errTimeout = fault.New(fault.KindTimeout, "timeout", "the agent did not answer in time")

// faultError is the API error of the first fault in err's chain (nil when
// there is none): the one place a domain error becomes a status and an
// envelope. A deadline that ended the work is a 504.
func faultError(err error) *Error {
	f, ok := fault.As(err)
	if !ok {
		if !errors.Is(err, context.DeadlineExceeded) {
			return nil
		}
		f, err = errTimeout, errTimeout
	}
	d := f.Fault()
	status := fiber.StatusInternalServerError
	if int(d.Kind) < len(kindStatus) && kindStatus[d.Kind] != 0 {
		status = kindStatus[d.Kind]
	}
	msg := d.Message
	if msg == "" {
		msg = err.Error()
	}
	return &Error{Status: status, Message: msg, Code: d.Code, Fields: d.Fields, RetryAfter: d.RetryAfter}
}
