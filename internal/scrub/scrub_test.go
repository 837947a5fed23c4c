package scrub

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"strings"
	"testing"
)

func TestRegisteredValuesAreRemovedInEveryEncoding(t *testing.T) {
	src := Register("test")
	defer src.Close()
	secret := `plain"sec ret/&=1`
	src.Set(secret, "short", "")
	raw, _ := json.Marshal(map[string]string{"m": "key " + secret})
	for _, in := range []string{
		"key " + secret + " end",
		string(raw),
		"https://x.test/?q=" + url.QueryEscape(secret),
	} {
		out := String(in)
		if strings.Contains(out, "sec ret") || strings.Contains(out, "sec+ret") || !strings.Contains(out, Redacted) {
			t.Errorf("String(%q) = %q", in, out)
		}
	}
	if got := JSON(raw); !json.Valid(got) || bytes.Contains(got, []byte("sec ret")) {
		t.Errorf("JSON = %s", got)
	}
	if String("a short word") != "a short word" {
		t.Error("values below MinSecretLen must not be scrubbed")
	}
	src.Set() // a reload that drops the value
	if String("key "+secret) != "key "+secret {
		t.Error("a dropped value is still scrubbed")
	}
}

func TestCredentialShapes(t *testing.T) {
	for in, leak := range map[string]string{
		"Authorization: Bearer abcDEF123456789":                 "abcDEF123456789",
		`{"authorization":"Basic dXNlcjpwYXNzd29yZDEyMw=="}`:    "dXNlcjpwYXNzd29yZDEyMw",
		"key sk-proj-AbCdEf0123456789xyz is invalid":            "AbCdEf0123456789",
		"sk-ant-api03-AbCdEf0123456789xyz":                      "AbCdEf0123456789",
		"GET https://api.test/v1?api_key=s3cr3tvalue&x=1":       "s3cr3tvalue",
		"GET https://api.test/v1?key=AIzaSyA0123456789abcdefgh": "AIzaSyA0123456789",
		"postgres://agentry:hunter2pass@db:5432/agentry":        "hunter2pass",
		`{"api_key": "abcdef123456"}`:                           "abcdef123456",
		"x-api-key: abcdef123456":                               "abcdef123456",
		"token ghp_0123456789abcdefghijABCDEFGHIJ":              "ghp_0123456789",
		"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl": "eyJzdWIiOiJ4In0",
		"AKIAABCDEFGHIJKLMNOP":                                  "AKIAABCDEFGHIJKLMNOP",
	} {
		if out := String(in); strings.Contains(out, leak) {
			t.Errorf("String(%q) = %q still holds %q", in, out, leak)
		}
	}
	// Ordinary words next to credential words survive.
	for _, in := range []string{"token budget exceeded", "the maximum context length is 8192 tokens", "basic information", "Bearer of news"} {
		if out := String(in); out != in {
			t.Errorf("String(%q) = %q", in, out)
		}
	}
}

func TestErrorKeepsTheChain(t *testing.T) {
	src := Register("test")
	defer src.Close()
	src.Set("zz-secret-value")
	base := errors.New("sentinel")
	err := Error(errors.Join(base, errors.New("echo zz-secret-value")))
	if strings.Contains(err.Error(), "zz-secret-value") || !errors.Is(err, base) {
		t.Fatalf("Error: %v", err)
	}
	if Error(nil) != nil {
		t.Fatal("nil")
	}
}

func TestLogHandlerScrubs(t *testing.T) {
	src := Register("test")
	defer src.Close()
	src.Set("zz-log-secret")
	var buf bytes.Buffer
	log := slog.New(Handler(slog.NewJSONHandler(&buf, nil))).With("k", "zz-log-secret")
	log.WithGroup("g").Info("msg zz-log-secret", "err", errors.New("Bearer abcdef0123456789"), "n", 3, slog.Group("x", "y", "zz-log-secret"))
	log.InfoContext(context.Background(), "x", "b", []byte("zz-log-secret"))
	if strings.Contains(buf.String(), "zz-log-secret") || strings.Contains(buf.String(), "abcdef0123456789") {
		t.Fatalf("log: %s", buf.String())
	}
	if !strings.Contains(buf.String(), `"n":3`) {
		t.Fatalf("numbers must pass: %s", buf.String())
	}
}
