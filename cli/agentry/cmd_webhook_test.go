package agentry

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

// TestWebhookVerify checks the published test vector of docs/webhooks.md
// through the command, and a tampered body.
func TestWebhookVerify(t *testing.T) {
	t.Setenv("AGENTRY_WORKSPACE", t.TempDir())
	t.Setenv("HOOK_SECRET", "whsec_test_secret")
	body := `{"channel":"webhook","text":"hello"}`
	captured := "POST /hook HTTP/1.1\r\nHost: receiver.example\r\nContent-Type: application/json\r\n" +
		"X-Agentry-Timestamp: 1700000000\r\nX-Agentry-Delivery: dlv_1\r\n" +
		"X-Agentry-Signature: sha256=70c768f12140ee604c7c363ca687bf68488d597905e5f7c60ad25b9bb120ed14\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	run := func(req string, extra ...string) (int, string, string) {
		var out, errb bytes.Buffer
		a := &App{Version: "test", Env: config.OSEnv, Stdin: strings.NewReader(req), Stdout: &out, Stderr: &errb}
		args := append([]string{"webhook", "verify", "--secret-env", "HOOK_SECRET", "--at", "1700000010"}, extra...)
		return a.Run(context.Background(), args), out.String(), errb.String()
	}
	if code, out, errs := run(captured); code != 0 || !strings.Contains(out, "valid signature (delivery dlv_1)") {
		t.Fatalf("vector: %d %q %q", code, out, errs)
	}
	if code, _, errs := run(strings.Replace(captured, "hello", "hullo", 1)); code != 1 || !strings.Contains(errs, "does not match") {
		t.Fatalf("tampered: %d %q", code, errs)
	}
	if code, out, _ := run(captured, "--json"); code != 0 || !strings.Contains(out, `"valid": true`) {
		t.Fatalf("json: %d %q", code, out)
	}
	var errb bytes.Buffer
	a := &App{Version: "test", Env: config.OSEnv, Stdin: strings.NewReader(captured), Stdout: &bytes.Buffer{}, Stderr: &errb}
	if code := a.Run(context.Background(), []string{"webhook", "verify"}); code != 2 {
		t.Fatalf("missing secret: exit %d %s", code, errb.String())
	}
}
