// Package delivery is Agentry's outbound webhook side: header-line parsing,
// the SSRF check of destinations, the HTTP attempt, the webhook channel
// adapter, the service that queues messages as Delivery workflows, and the
// event hooks that feed it. The signature scheme itself lives in
// internal/signature (the CLI verifies with it without linking this
// package); the names below keep it reachable from here.
package delivery

import (
	"net/http"
	"time"

	"github.com/agentryhq/agentry/internal/signature"
)

// Header names of the scheme.
const (
	HeaderTimestamp = signature.HeaderTimestamp
	HeaderSignature = signature.HeaderSignature
	HeaderDelivery  = signature.HeaderDelivery
)

// DefaultTolerance is how far a timestamp may be from the receiver's clock.
const DefaultTolerance = signature.DefaultTolerance

// Verification errors (errors.Is works on what Verify returns).
var (
	ErrNoSignature       = signature.ErrNoSignature
	ErrBadTimestamp      = signature.ErrBadTimestamp
	ErrTimestampExpired  = signature.ErrTimestampExpired
	ErrSignatureMismatch = signature.ErrSignatureMismatch
)

// Sign is signature.Sign.
func Sign(secret string, ts int64, body []byte) string { return signature.Sign(secret, ts, body) }

// SetSignature is signature.SetSignature.
func SetSignature(h http.Header, secret string, now time.Time, body []byte) {
	signature.SetSignature(h, secret, now, body)
}

// Verify is signature.Verify.
func Verify(secret string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	return signature.Verify(secret, header, body, now, tolerance)
}
