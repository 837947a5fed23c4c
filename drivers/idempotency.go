package drivers

import (
	"context"
	"net/http"
)

// Idempotency keys (docs/tools.md, "Idempotency keys"). Every tool call
// the gateway makes carries a key in its context that names the call's
// step: in a durable run (task run, scheduled firing, webhook run, channel
// turn) the same step gets the same key however often it is executed
// (activity retries, a worker that died mid-call, continue-as-new), and a
// different step a different key. A tool with side effects passes it on,
// so the system it changes can do the change once.

// IdempotencyKeyHeader is the HTTP request header a tool sends the key in
// (the name Stripe, the IETF draft "The Idempotency-Key HTTP Header
// Field" and most payment and ticketing APIs use).
const IdempotencyKeyHeader = "Idempotency-Key"

// IdempotencyKeyEnv is the environment variable a skill script finds the
// key in.
const IdempotencyKeyEnv = "AGENTRY_IDEMPOTENCY_KEY"

type idempotencyKey struct{}

// WithIdempotencyKey is ctx carrying key (the gateway sets it before it
// runs a tool; an empty key leaves ctx as it is).
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	if key == "" {
		return ctx
	}
	return context.WithValue(ctx, idempotencyKey{}, key)
}

// IdempotencyKey is the idempotency key of the tool call ctx belongs to,
// or "" outside one.
func IdempotencyKey(ctx context.Context) string {
	k, _ := ctx.Value(idempotencyKey{}).(string)
	return k
}

// SetIdempotencyKey puts the key of the tool call req's context belongs
// to in its Idempotency-Key header, unless there is no key or the header
// is set already. Every HTTP request a tool makes goes through it (the
// builtin http_get does).
func SetIdempotencyKey(req *http.Request) {
	if key := IdempotencyKey(req.Context()); key != "" && req.Header.Get(IdempotencyKeyHeader) == "" {
		req.Header.Set(IdempotencyKeyHeader, key)
	}
}
