package signature

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"
)

// signatureVectors are published in docs/webhooks.md. The expected values
// were computed independently with
// `printf '%s' "<ts>.<body>" | openssl dgst -sha256 -hmac "<secret>"`.
var signatureVectors = []struct {
	secret string
	ts     int64
	body   string
	want   string
}{
	{"whsec_test_secret", 1700000000, `{"channel":"webhook","text":"hello"}`,
		"sha256=70c768f12140ee604c7c363ca687bf68488d597905e5f7c60ad25b9bb120ed14"},
	{"whsec_test_secret", 1700000000, ``,
		"sha256=316b9ab98c15bfa039d243f3196acee619cf29749a91a634e6a8154e2f7b6727"},
	{"correct horse battery staple", 1714000000,
		`{"delivery_id":"dlv_0123456789abcdef0123456789abcdef","channel":"webhook","text":"Daily report: 3 incidents","source":"schedule","created_at":"2024-04-24T23:06:40Z"}`,
		"sha256=2ec2698aec3ac78e9b24cbba43db169c66b30baeaedb982f290c1dc0bc5aa1e0"},
}

func TestSignMatchesPublishedVectors(t *testing.T) {
	for _, v := range signatureVectors {
		if got := Sign(v.secret, v.ts, []byte(v.body)); got != v.want {
			t.Errorf("Sign(%q, %d, %q) = %s, want %s", v.secret, v.ts, v.body, got, v.want)
		}
	}
}

func TestVerifyVectors(t *testing.T) {
	for _, v := range signatureVectors {
		h := http.Header{}
		h.Set(HeaderTimestamp, strconv.FormatInt(v.ts, 10))
		h.Set(HeaderSignature, v.want)
		if err := Verify(v.secret, h, []byte(v.body), time.Unix(v.ts+30, 0), 0); err != nil {
			t.Errorf("vector %q: %v", v.body, err)
		}
	}
}

func TestVerifyRejects(t *testing.T) {
	secret, body := "s3cret", []byte(`{"text":"hi"}`)
	now := time.Unix(1700000000, 0)
	signed := func(ts time.Time, b []byte) http.Header {
		h := http.Header{}
		SetSignature(h, secret, ts, b)
		return h
	}
	cases := []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"no signature", http.Header{}, body, ErrNoSignature},
		{"tampered body", signed(now, body), []byte(`{"text":"HI"}`), ErrSignatureMismatch},
		{"old timestamp", signed(now.Add(-301*time.Second), body), body, ErrTimestampExpired},
		{"future timestamp", signed(now.Add(301*time.Second), body), body, ErrTimestampExpired},
		{"bad timestamp", func() http.Header { h := signed(now, body); h.Set(HeaderTimestamp, "yesterday"); return h }(), body, ErrBadTimestamp},
		{"timestamp changed", func() http.Header { h := signed(now, body); h.Set(HeaderTimestamp, "1700000001"); return h }(), body, ErrSignatureMismatch},
		{"other secret", func() http.Header { h := http.Header{}; SetSignature(h, "other", now, body); return h }(), body, ErrSignatureMismatch},
	}
	for _, c := range cases {
		if err := Verify(secret, c.header, c.body, now, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// Within tolerance, and one of several signatures (rotation).
	h := signed(now.Add(-299*time.Second), body)
	h.Set(HeaderSignature, "sha256=00,"+h.Get(HeaderSignature))
	if err := Verify(secret, h, body, now, 0); err != nil {
		t.Errorf("rotation list: %v", err)
	}
}

func TestUnsignedWithoutSecret(t *testing.T) {
	h := http.Header{}
	SetSignature(h, "", time.Now(), []byte("x"))
	if h.Get(HeaderSignature) != "" || h.Get(HeaderTimestamp) != "" {
		t.Fatalf("headers set without a secret: %v", h)
	}
}
