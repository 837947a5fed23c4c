// Package signature is the signature scheme of Agentry's outbound webhooks
// (docs/webhooks.md publishes it with test vectors): signing, for the
// gateway's delivery side (internal/delivery), and verification, for
// receivers and the agentry CLI's `webhook verify`. It is a leaf (standard
// library only) so the CLI links no server package through it.
//
//	X-Agentry-Timestamp: <unix seconds>
//	X-Agentry-Signature: sha256=<lowercase hex HMAC-SHA256(secret, "<timestamp>.<raw body>")>
//	X-Agentry-Delivery:  <delivery id, the same on every retry>
//
// Receivers reject a timestamp more than five minutes away from their
// clock and compare signatures in constant time.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Header names of the scheme.
const (
	HeaderTimestamp = "X-Agentry-Timestamp"
	HeaderSignature = "X-Agentry-Signature"
	HeaderDelivery  = "X-Agentry-Delivery"
	// signaturePrefix names the algorithm in the signature header.
	signaturePrefix = "sha256="
)

// DefaultTolerance is how far a timestamp may be from the receiver's clock.
const DefaultTolerance = 300 * time.Second

// Verification errors (errors.Is works on what Verify returns).
var (
	ErrNoSignature       = errors.New("the request carries no X-Agentry-Signature header")
	ErrBadTimestamp      = errors.New("X-Agentry-Timestamp is missing or not a unix time in seconds")
	ErrTimestampExpired  = errors.New("X-Agentry-Timestamp is outside the tolerance (replayed or clock skew)")
	ErrSignatureMismatch = errors.New("signature does not match the body and timestamp")
)

// Sign returns the X-Agentry-Signature value for a body sent at unix time ts.
func Sign(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

// SetSignature adds the timestamp and signature headers for body at now.
// With an empty secret it adds neither (the message goes unsigned).
func SetSignature(h http.Header, secret string, now time.Time, body []byte) {
	if secret == "" {
		h.Del(HeaderTimestamp)
		h.Del(HeaderSignature)
		return
	}
	ts := now.Unix()
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Sign(secret, ts, body))
}

// Verify checks a received request: the timestamp is within tolerance of
// now (0 means DefaultTolerance) and the signature matches the raw body.
// The header may list several signatures separated by commas (for secret
// rotation); one match suffices. Comparison is constant-time.
func Verify(secret string, header http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	sigs := header.Values(HeaderSignature)
	if len(sigs) == 0 || strings.TrimSpace(strings.Join(sigs, "")) == "" {
		return ErrNoSignature
	}
	raw := strings.TrimSpace(header.Get(HeaderTimestamp))
	ts, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || ts <= 0 {
		return ErrBadTimestamp
	}
	sent := time.Unix(ts, 0)
	if d := now.Sub(sent); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: sent %s, now %s", ErrTimestampExpired, sent.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	want := []byte(Sign(secret, ts, body))
	for _, v := range sigs {
		for _, sig := range strings.Split(v, ",") {
			if hmac.Equal([]byte(strings.ToLower(strings.TrimSpace(sig))), want) {
				return nil
			}
		}
	}
	return ErrSignatureMismatch
}
