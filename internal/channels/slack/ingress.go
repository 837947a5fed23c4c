package slack

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack/slackevents"

	"github.com/agentryhq/agentry/internal/channels"
)

// SignatureWindow is how far a callback's X-Slack-Request-Timestamp may be
// from the time it was received (Slack's own recommendation: replays of a
// captured request are refused after it).
const SignatureWindow = 5 * time.Minute

// Ingress handles one Events API callback (POST /ingress/<channel id>).
// Unverified callbacks get 401 and reach no sink; a url_verification is
// answered with its challenge; a message is answered 200 only after the
// sink accepted it (500 otherwise, so Slack retries it). Retries
// (X-Slack-Retry-Num) are processed like first deliveries: the message's
// identity makes the downstream join the work already started.
func (a *Adapter) Ingress(ctx context.Context, r channels.IngressRequest) channels.IngressResponse {
	id := a.deps.Settings.ID
	if a.mode != ModeEvents {
		return text(http.StatusNotFound, "this Slack channel runs in socket mode; it takes no Events API callbacks\n")
	}
	received := r.Received
	if received.IsZero() {
		received = time.Now()
	}
	if err := verify(r.Header, r.Body, a.deps.Settings.SigningSecret, received); err != nil {
		a.deps.Logf("slack channel %s: refused a callback: %v", id, err)
		return text(http.StatusUnauthorized, "unverified request\n")
	}
	var cb callback
	if err := json.Unmarshal(r.Body, &cb); err != nil {
		a.deps.Logf("slack channel %s: unreadable callback body: %v", id, err)
		return text(http.StatusBadRequest, "unreadable body\n")
	}
	if cb.Type == slackevents.URLVerification {
		return text(http.StatusOK, cb.Challenge)
	}
	retry := ""
	if n := r.Header.Get("X-Slack-Retry-Num"); n != "" {
		retry = "retry " + n
		if reason := r.Header.Get("X-Slack-Retry-Reason"); reason != "" {
			retry += ", " + reason
		}
	}
	if err := a.handle(ctx, cb, retry); err != nil {
		a.deps.Logf("slack channel %s: event %s not accepted (Slack will retry): %v", id, cb.EventID, err)
		return text(http.StatusInternalServerError, "not accepted, retry\n")
	}
	return text(http.StatusOK, "")
}

func text(status int, body string) channels.IngressResponse {
	return channels.IngressResponse{Status: status, ContentType: "text/plain; charset=utf-8", Body: []byte(body)}
}

var (
	errMissingSignature = errors.New("missing X-Slack-Signature or X-Slack-Request-Timestamp")
	errBadSignature     = errors.New("the signature does not match")
	errStale            = errors.New("the request timestamp is outside the 5-minute window")
)

// verify checks Slack's v0 request signature: HMAC-SHA256 over
// "v0:<timestamp>:<body>" with the signing secret, hex in
// X-Slack-Signature as "v0=<hex>", and the timestamp within
// SignatureWindow of when the request was received. (slack-go's
// SecretsVerifier does the same but measures the window against the
// clock at call time, not the receive time.)
func verify(h http.Header, body []byte, secret string, received time.Time) error {
	sig, ts := h.Get("X-Slack-Signature"), h.Get("X-Slack-Request-Timestamp")
	if sig == "" || ts == "" {
		return errMissingSignature
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return errStale
	}
	if d := received.Sub(time.Unix(sec, 0)); d > SignatureWindow || d < -SignatureWindow {
		return errStale
	}
	hexSig, ok := strings.CutPrefix(sig, "v0=")
	if !ok {
		return errBadSignature
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return errBadSignature
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	if !hmac.Equal(got, mac.Sum(nil)) {
		return errBadSignature
	}
	return nil
}
