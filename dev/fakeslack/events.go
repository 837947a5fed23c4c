package fakeslack

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Event is one Events API event: its event_id and time (kept across
// Slack's retries) and the inner event JSON.
type Event struct {
	ID    string
	Time  int64
	Inner map[string]any
}

var eventSeq atomic.Int64

func newEventID() string { return fmt.Sprintf("Ev%010d", eventSeq.Add(1)) }

// MessageOption adjusts a message event built by Message.
type MessageOption func(m map[string]any)

// InThread makes the message a reply in the thread of threadTS.
func InThread(threadTS string) MessageOption {
	return func(m map[string]any) { m["thread_ts"] = threadTS }
}

// AppMention makes the event an app_mention (no channel_type, as Slack).
func AppMention() MessageOption {
	return func(m map[string]any) { m["type"] = "app_mention"; delete(m, "channel_type") }
}

// Subtype sets the message subtype (message_changed, message_deleted,
// channel_join, bot_message ...).
func Subtype(st string) MessageOption { return func(m map[string]any) { m["subtype"] = st } }

// BotID marks the message as posted by a bot.
func BotID(id string) MessageOption { return func(m map[string]any) { m["bot_id"] = id } }

// TS sets the message's ts instead of a fresh one.
func TS(ts string) MessageOption { return func(m map[string]any) { m["ts"] = ts; m["event_ts"] = ts } }

// Message builds a message event as Slack sends it: channel, channel_type
// (im, channel, group, mpim), user, text and a fresh ts.
func (s *Server) Message(channel, channelType, user, text string, opts ...MessageOption) Event {
	ts := s.nextTS()
	m := map[string]any{
		"type": "message", "channel": channel, "channel_type": channelType,
		"user": user, "text": text, "ts": ts, "event_ts": ts, "team": s.opts.TeamID,
	}
	for _, o := range opts {
		o(m)
	}
	if m["subtype"] == "message_changed" {
		// An edit carries the new message inside and a ts of its own.
		m["message"] = map[string]any{"type": "message", "user": user, "text": text, "ts": m["ts"]}
		m["ts"], m["event_ts"] = s.nextTS(), s.nextTS()
		delete(m, "user")
		delete(m, "text")
	}
	if m["subtype"] == "message_deleted" {
		m["deleted_ts"] = m["ts"]
		m["ts"] = s.nextTS()
		delete(m, "user")
		delete(m, "text")
	}
	return Event{ID: newEventID(), Time: time.Now().Unix(), Inner: m}
}

// MentionOf is the app_mention event Slack sends besides the message
// event of a message that mentions the bot: same channel, ts and text,
// its own event_id.
func (s *Server) MentionOf(ev Event) Event {
	m := map[string]any{}
	for k, v := range ev.Inner {
		m[k] = v
	}
	AppMention()(m)
	return Event{ID: newEventID(), Time: ev.Time, Inner: m}
}

// EchoOf is the message event of the bot's own post (Slack sends those to
// the bot too).
func (s *Server) EchoOf(p Post, channelType string) Event {
	m := map[string]any{
		"type": "message", "channel": p.Channel, "channel_type": channelType,
		"user": s.opts.BotUserID, "bot_id": s.opts.BotID, "text": p.Text, "ts": p.TS, "event_ts": p.TS,
	}
	if p.ThreadTS != "" {
		m["thread_ts"] = p.ThreadTS
	}
	return Event{ID: newEventID(), Time: time.Now().Unix(), Inner: m}
}

// Callback is the event_callback JSON of ev.
func (s *Server) Callback(ev Event) []byte {
	b, _ := json.Marshal(map[string]any{
		"token": "verification-token-unused", "team_id": s.opts.TeamID, "api_app_id": "A0FAKE",
		"type": "event_callback", "event_id": ev.ID, "event_time": ev.Time, "event": ev.Inner,
		"authorizations": []map[string]any{{"team_id": s.opts.TeamID, "user_id": s.opts.BotUserID, "is_bot": true}},
	})
	return b
}

// Sign returns Slack's signature headers for body at time at.
func Sign(secret string, body []byte, at time.Time) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("v0:" + ts + ":"))
	mac.Write(body)
	h := http.Header{}
	h.Set("X-Slack-Request-Timestamp", ts)
	h.Set("X-Slack-Signature", "v0="+hex.EncodeToString(mac.Sum(nil)))
	return h
}

// Attempt is one POST of a delivery.
type Attempt struct {
	RetryNum int    // 0 for the first delivery
	Reason   string // "" first, then http_error or http_timeout
	Status   int    // 0 when no answer came in time
	Err      error
}

// Delivery is the outcome of Deliver: every attempt, and whether one was
// answered 2xx.
type Delivery struct {
	EventID  string
	Attempts []Attempt
	OK       bool
}

// Deliver POSTs ev as a signed event_callback to ingressURL like Slack:
// a non-2xx answer or none within AnswerTimeout is retried up to 3
// times, each with a fresh signature and X-Slack-Retry-Num /
// X-Slack-Retry-Reason. (Slack waits about a minute and then five between
// retries; the fake retries at once.)
func (s *Server) Deliver(ctx context.Context, ingressURL string, ev Event) Delivery {
	body := s.Callback(ev)
	d := Delivery{EventID: ev.ID}
	reason := ""
	for n := 0; n <= 3; n++ {
		h := Sign(s.opts.SigningSecret, body, time.Now())
		if n > 0 {
			h.Set("X-Slack-Retry-Num", strconv.Itoa(n))
			h.Set("X-Slack-Retry-Reason", reason)
		}
		status, err := s.post(ctx, ingressURL, h, body)
		d.Attempts = append(d.Attempts, Attempt{RetryNum: n, Reason: reason, Status: status, Err: err})
		if err == nil && status/100 == 2 {
			d.OK = true
			return d
		}
		if ctx.Err() != nil {
			return d
		}
		reason = "http_error"
		if status == 0 {
			reason = "http_timeout"
		}
	}
	return d
}

// post sends one request and returns the status (0 and the error when no
// answer came within AnswerTimeout).
func (s *Server) post(ctx context.Context, u string, h http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Slackbot 1.0 (+https://api.slack.com/robots)")
	res, err := s.http.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, nil
}

// PostRaw sends body once with the given headers (no retries) and returns
// the answer's status and body: for forged, unsigned or stale requests.
func (s *Server) PostRaw(ctx context.Context, ingressURL string, h http.Header, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ingressURL, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	if h != nil {
		req.Header = h.Clone()
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := s.http.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, string(b), nil
}

// DeliverForged sends ev once signed with the wrong secret.
func (s *Server) DeliverForged(ctx context.Context, ingressURL string, ev Event) (int, error) {
	body := s.Callback(ev)
	st, _, err := s.PostRaw(ctx, ingressURL, Sign(s.opts.SigningSecret+"-forged", body, time.Now()), body)
	return st, err
}

// DeliverUnsigned sends ev once without signature headers.
func (s *Server) DeliverUnsigned(ctx context.Context, ingressURL string, ev Event) (int, error) {
	st, _, err := s.PostRaw(ctx, ingressURL, http.Header{}, s.Callback(ev))
	return st, err
}

// DeliverStale sends ev once, correctly signed but with a timestamp age
// in the past (a replay).
func (s *Server) DeliverStale(ctx context.Context, ingressURL string, ev Event, age time.Duration) (int, error) {
	body := s.Callback(ev)
	st, _, err := s.PostRaw(ctx, ingressURL, Sign(s.opts.SigningSecret, body, time.Now().Add(-age)), body)
	return st, err
}

// URLVerification sends Slack's signed url_verification with challenge and
// returns the answer.
func (s *Server) URLVerification(ctx context.Context, ingressURL, challenge string) (int, string, error) {
	body, _ := json.Marshal(map[string]any{"token": "verification-token-unused", "challenge": challenge, "type": "url_verification"})
	return s.PostRaw(ctx, ingressURL, Sign(s.opts.SigningSecret, body, time.Now()), body)
}

// ErrNotAcked is returned by WaitAcked when ctx ends first.
var ErrNotAcked = errors.New("fakeslack: envelope not acknowledged")
