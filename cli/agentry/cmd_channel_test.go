package agentry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

// channelGateway is the gateway side of the channel routes as the CLI
// sees them, over real HTTP on loopback: it records every request and
// answers from views the test sets (the server's own behaviour is tested
// in api/ and e2e/; here the client is under test).
type channelGateway struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
	patches  []map[string]any
	views    map[string]string   // id -> GET /channels/{id} body
	polls    map[string][]string // id -> successive GET bodies (the last repeats)
	pair     string              // POST .../pair body
}

func newChannelGateway(t *testing.T) *channelGateway {
	g := &channelGateway{views: map[string]string{}, polls: map[string][]string{}}
	g.Server = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.Close)
	return g
}

func (g *channelGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.requests = append(g.requests, r.Method+" "+r.URL.RequestURI())
	if r.Header.Get("Authorization") != "Bearer test-key" {
		w.WriteHeader(401)
		io.WriteString(w, `{"error":"unauthenticated"}`)
		return
	}
	path := strings.TrimPrefix(r.URL.Path, "/api/v1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "PATCH" && len(parts) == 2:
		var body struct {
			Settings map[string]any `json:"settings"`
		}
		json.NewDecoder(r.Body).Decode(&body)
		g.patches = append(g.patches, body.Settings)
		io.WriteString(w, `{"id":"`+parts[1]+`","type":"`+parts[1]+`","enabled":true,"settings":{}}`)
	case r.Method == "GET" && path == "/channels":
		io.WriteString(w, `{"channels":[`+g.views["webhook"]+`,`+g.views["telegram"]+`]}`)
	case r.Method == "GET" && len(parts) == 2 && len(g.polls[parts[1]]) > 0:
		io.WriteString(w, g.polls[parts[1]][0])
		if len(g.polls[parts[1]]) > 1 {
			g.polls[parts[1]] = g.polls[parts[1]][1:]
		}
	case r.Method == "GET" && len(parts) == 2 && g.views[parts[1]] != "":
		io.WriteString(w, g.views[parts[1]])
	case r.Method == "GET" && len(parts) == 3 && parts[2] == "messages":
		io.WriteString(w, `{"messages":[{"message_id":"upd-7","chat_id":"42","user_id":"u1","status":"answered","reply_ids":["100","101"],"run_id":"r1","received_at":"2026-01-02T03:04:05Z","answered_at":"2026-01-02T03:04:09Z"}],"count":1}`)
	case r.Method == "POST" && len(parts) == 3 && parts[2] == "pair" && g.pair != "":
		io.WriteString(w, g.pair)
	case r.Method == "POST" && len(parts) == 3 && parts[2] == "unpair":
		io.WriteString(w, `{"id":"whatsapp","type":"whatsapp","enabled":true,"adapter":{"state":"unpaired"}}`)
	default:
		w.WriteHeader(404)
		io.WriteString(w, `{"error":"unknown channel"}`)
	}
}

func (g *channelGateway) lastPatch() map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.patches) == 0 {
		return nil
	}
	return g.patches[len(g.patches)-1]
}

func (g *channelGateway) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.requests)
}

// runCLI runs one command line against g and returns the exit code,
// standard output and standard error.
func runCLI(t *testing.T, g *channelGateway, stdin string, args ...string) (int, string, string) {
	t.Helper()
	t.Setenv("AGENTRY_WORKSPACE", t.TempDir())
	var out, errb bytes.Buffer
	a := &App{Version: "test", Env: config.OSEnv, Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb}
	code := a.Run(context.Background(), append([]string{"--gateway", g.URL, "--api-key", "test-key"}, args...))
	return code, out.String(), errb.String()
}

// TestChannelConfigureFlagsToSettings checks what each configure flag
// sends: the shared chat flags, --agent, --mode, the URLs, credentials
// from the command line, standard input and a file, and --enable; and
// that bad combinations are usage errors that send nothing.
func TestChannelConfigureFlagsToSettings(t *testing.T) {
	g := newChannelGateway(t)
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	signing, botFile := file("signing", "sig-from-file\n"), file("bot", "discord-token-from-file")
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  map[string]any
	}{
		{"telegram everything", "", []string{"channel", "telegram", "configure", "--bot-token", "123:abc", "--agent", "helper", "--mode", "webhook",
			"--public-url", "https://gw.example.com/ingress/telegram", "--api-base-url", "http://127.0.0.1:8081", "--trigger", "@bot",
			"--allow-groups", "--allowed-chats", "1,-100200", "--allowed-users", "u1", "--allowed-users", "u2", "--enable"},
			map[string]any{"bot_token": "123:abc", "agent": "helper", "mode": "webhook", "public_url": "https://gw.example.com/ingress/telegram",
				"api_base_url": "http://127.0.0.1:8081", "trigger": "@bot", "allow_groups": true, "allowed_chats": []any{"1", "-100200"},
				"allowed_users": []any{"u1", "u2"}, "enabled": true}},
		{"telegram token from stdin, secret token from flag", "123:from-stdin\n", []string{"channel", "telegram", "configure", "--bot-token-stdin", "--secret-token", "s3cret_tok"},
			map[string]any{"bot_token": "123:from-stdin", "secret_token": "s3cret_tok"}},
		{"slack secrets from a file and stdin", "xapp-1-stdin", []string{"channel", "slack", "configure", "--signing-secret-file", signing, "--app-token-stdin", "--mode", "socket"},
			map[string]any{"signing_secret": "sig-from-file", "app_token": "xapp-1-stdin", "mode": "socket"}},
		{"discord token from a file, enable", "", []string{"channel", "discord", "configure", "--bot-token-file", botFile, "--enable"},
			map[string]any{"bot_token": "discord-token-from-file", "enabled": true}},
		{"clear lists and groups off", "", []string{"channel", "discord", "configure", "--allowed-chats=", "--allow-groups=false"},
			map[string]any{"allowed_chats": []any{}, "allow_groups": false}},
		{"whatsapp agent and enable", "", []string{"channel", "whatsapp", "configure", "--agent", "helper", "--enable"},
			map[string]any{"agent": "helper", "enabled": true}},
		{"webhook enable with url", "", []string{"channel", "webhook", "configure", "--url", "https://hooks.example.com/x", "--enable"},
			map[string]any{"url": "https://hooks.example.com/x", "enabled": true}},
		{"--set passes other keys", "", []string{"channel", "slack", "configure", "--set", "allow_groups=true", "--set", "agent=ops"},
			map[string]any{"allow_groups": true, "agent": "ops"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := runCLI(t, g, c.stdin, c.args...)
			if code != 0 {
				t.Fatalf("exit %d\n%s%s", code, out, errs)
			}
			if got := g.lastPatch(); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("PATCH settings = %#v\nwant %#v", got, c.want)
			}
			for _, v := range c.want {
				if s, ok := v.(string); ok && strings.Contains(s, "tok") && strings.Contains(out+errs, s) {
					t.Fatalf("a credential is printed: %q", out+errs)
				}
			}
		})
	}

	bad := []struct {
		name string
		args []string
		want string
	}{
		{"value and file", []string{"channel", "telegram", "configure", "--bot-token", "x", "--bot-token-file", botFile}, "use one of --bot-token"},
		{"two from stdin", []string{"channel", "slack", "configure", "--bot-token-stdin", "--app-token-stdin"}, "standard input holds one value"},
		{"nothing", []string{"channel", "telegram", "configure"}, "nothing to change"},
		{"whatsapp has no token", []string{"channel", "whatsapp", "configure", "--bot-token", "x"}, "unknown flag: --bot-token"},
		{"discord has no public url", []string{"channel", "discord", "configure", "--public-url", "https://x"}, "unknown flag: --public-url"},
		{"telegram has no app token", []string{"channel", "telegram", "configure", "--app-token", "x"}, "unknown flag: --app-token"},
		{"empty stdin", []string{"channel", "discord", "configure", "--bot-token-stdin"}, "is empty"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			before := g.count()
			code, _, errs := runCLI(t, g, "", c.args...)
			if code != ExitUsage || !strings.Contains(errs, c.want) {
				t.Fatalf("exit %d, stderr %q; want usage error with %q", code, errs, c.want)
			}
			if g.count() != before {
				t.Fatalf("a refused command sent a request")
			}
		})
	}
}

const telegramView = `{"id":"telegram","type":"telegram","enabled":true,
	"settings":{"type":"telegram","enabled":true,"agent":"helper","mode":"%MODE%","bot_token":"********","secret_token":"********","public_url":"","allowed_chats":[],"allow_groups":false,"ingress_path":"/ingress/telegram"},
	"overridden":["bot_token"],
	"adapter":{"state":"connected","since":"2026-01-02T03:04:05Z","received":3,"ignored":4,"last_error":"getUpdates: 502","last_error_at":"2026-01-02T03:00:00Z"},
	"messages":{"received":3,"answered":2,"failed":1,"last_message_at":"2026-01-02T03:05:00Z","last_chat":"42","last_status":"answered"},
	"status":{"last_delivery_at":null,"last_status":"delivered","last_error":"","failures":0,"deliveries":2,"pending":0}}`

// TestChannelStatusPrintsIngressURL: status of a messaging channel shows
// its state, counts and settings, and the full URL to register with the
// platform when it receives by callbacks (Telegram webhook mode, Slack
// Events API mode), not otherwise.
func TestChannelStatusPrintsIngressURL(t *testing.T) {
	g := newChannelGateway(t)
	g.views["telegram"] = strings.Replace(telegramView, "%MODE%", "webhook", 1)
	code, out, errs := runCLI(t, g, "", "channel", "telegram", "status")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"ingress url: " + g.URL + "/ingress/telegram", "state: connected since ", "agent: helper",
		"mode: webhook", "messages: 3 received, 2 answered, 1 failed", "getUpdates: 502", "bot_token ********", "secret_token ********", "2 deliveries, 0 failed"} {
		if !strings.Contains(flat, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	g.views["telegram"] = strings.Replace(telegramView, "%MODE%", "polling", 1)
	_, out, _ = runCLI(t, g, "", "channel", "status", "telegram")
	if strings.Contains(out, g.URL+"/ingress") || !strings.Contains(out, "polling mode takes no callbacks") {
		t.Errorf("polling mode status:\n%s", out)
	}
	g.views["slack"] = `{"id":"slack","type":"slack","enabled":true,"settings":{"mode":"events","ingress_path":"/ingress/slack"},"adapter":{"state":"connected"}}`
	if _, out, _ := runCLI(t, g, "", "channel", "slack", "status"); !strings.Contains(out, g.URL+"/ingress/slack") {
		t.Errorf("slack events mode status:\n%s", out)
	}
	_, out, _ = runCLI(t, g, "", "--json", "channel", "telegram", "status")
	var v map[string]any
	if err := json.Unmarshal([]byte(out), &v); err != nil || v["adapter"].(map[string]any)["state"] != "connected" {
		t.Errorf("--json: %v\n%s", err, out)
	}
}

// TestChannelListAndMessages: the list shows messaging channels with their
// state and message counts next to the webhook channel; messages prints
// the inbound table and passes --limit.
func TestChannelListAndMessages(t *testing.T) {
	g := newChannelGateway(t)
	g.views["webhook"] = `{"id":"webhook","type":"webhook","enabled":false,"settings":{},"status":{"last_delivery_at":null,"deliveries":5,"failures":2}}`
	g.views["telegram"] = strings.Replace(telegramView, "%MODE%", "polling", 1)
	code, out, errs := runCLI(t, g, "", "channel", "list")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || strings.Join(strings.Fields(lines[0]), " ") != "ID TYPE ENABLED STATE LAST MESSAGE/DELIVERY RECEIVED FAILURES" {
		t.Fatalf("list:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) != 7 || f[0] != "webhook" || f[3] != "-" || f[6] != "2" {
		t.Errorf("webhook row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); len(f) != 8 || f[0] != "telegram" || f[3] != "connected" || f[6] != "3" || f[7] != "1" {
		t.Errorf("telegram row %q", lines[2])
	}
	code, out, errs = runCLI(t, g, "", "channel", "messages", "telegram", "--limit", "5")
	if code != 0 || !strings.Contains(out, "upd-7") || !strings.Contains(out, "100,101") || !strings.Contains(out, "answered") {
		t.Fatalf("messages: exit %d\n%s%s", code, out, errs)
	}
	if code, _, _ = runCLI(t, g, "", "channel", "telegram", "messages", "--limit", "0"); code != ExitUsage {
		t.Errorf("--limit 0: exit %d", code)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !contains(g.requests, "GET /api/v1/channels/telegram/messages?limit=5") {
		t.Errorf("requests %q", g.requests)
	}
}

func pairingView(state, qr, jid, lastErr string) string {
	detail := map[string]string{}
	if qr != "" {
		detail["qr"] = qr
	}
	if jid != "" {
		detail["jid"] = jid
	}
	b, _ := json.Marshal(map[string]any{"id": "whatsapp", "type": "whatsapp", "enabled": true, "settings": map[string]any{"mode": "web"},
		"adapter": map[string]any{"state": state, "since": "2026-01-02T03:04:05Z", "detail": detail, "last_error": lastErr}})
	return string(b)
}

// TestWhatsAppPairPolling drives `pair` against a gateway whose channel
// goes pairing (no code yet) -> code 1 -> code 1 -> code 2 -> paired: each
// code is drawn once, in the order issued, and the account is printed;
// a pairing that ends unpaired with an error, and one that outlasts
// --timeout, exit 1 with the reason.
func TestWhatsAppPairPolling(t *testing.T) {
	old := pairPollInterval
	pairPollInterval = 0
	t.Cleanup(func() { pairPollInterval = old })
	const qr1, qr2 = "2@first-code,abc,def,ghi", "2@second-code,jkl,mno,pqr"
	art1, err := renderQR(qr1)
	if err != nil {
		t.Fatal(err)
	}
	art2, _ := renderQR(qr2)

	g := newChannelGateway(t)
	g.pair = pairingView("pairing", "", "", "")
	g.polls["whatsapp"] = []string{pairingView("pairing", qr1, "", ""), pairingView("pairing", qr1, "", ""),
		pairingView("pairing", qr2, "", ""), pairingView("paired", "", "4915112345678@s.whatsapp.net", "")}
	code, out, errs := runCLI(t, g, "", "channel", "whatsapp", "pair")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	if out != "Paired as 4915112345678@s.whatsapp.net.\n" {
		t.Errorf("stdout %q", out)
	}
	i1, i2 := strings.Index(errs, art1), strings.Index(errs, art2)
	if i1 < 0 || i2 < i1 || strings.Count(errs, art1) != 1 || strings.Count(errs, art2) != 1 || !strings.Contains(errs, "new code") {
		t.Errorf("stderr does not show code 1 then code 2 once each:\n%s", errs)
	}
	g.mu.Lock()
	if g.requests[0] != "POST /api/v1/channels/whatsapp/pair" || len(g.requests) != 5 {
		t.Errorf("requests %q", g.requests)
	}
	g.mu.Unlock()

	// Pairing fails: the gateway's reason, exit 1.
	g.polls["whatsapp"] = []string{pairingView("pairing", qr1, "", ""), pairingView("unpaired", "", "", "whatsapp: pairing timed out: no phone scanned the QR code")}
	code, out, errs = runCLI(t, g, "", "--json", "channel", "whatsapp", "pair")
	if code != 1 || !strings.Contains(errs, "no phone scanned the QR code") {
		t.Errorf("failed pairing: exit %d %q", code, errs)
	}
	var v map[string]any
	if json.Unmarshal([]byte(out), &v) != nil || v["adapter"].(map[string]any)["state"] != "unpaired" {
		t.Errorf("--json final view: %q", out)
	}

	// Nobody scans: --timeout ends it.
	pairPollInterval = 5e6 // 5 ms
	g.polls["whatsapp"] = []string{pairingView("pairing", qr1, "", "")}
	code, _, errs = runCLI(t, g, "", "channel", "whatsapp", "pair", "--timeout", "100ms")
	if code != 1 || !strings.Contains(errs, "no phone scanned the code in time") {
		t.Errorf("timeout: exit %d %q", code, errs)
	}

	// A gateway that refuses (not enabled): its error, exit 1.
	g.pair = ""
	if code, _, errs = runCLI(t, g, "", "channel", "whatsapp", "pair"); code != 1 || !strings.Contains(errs, "unknown channel") {
		t.Errorf("refused: exit %d %q", code, errs)
	}

	// status names the account and the state's start; unpair.
	g.polls["whatsapp"] = []string{pairingView("connected", "", "4915112345678@s.whatsapp.net", "")}
	_, out, _ = runCLI(t, g, "", "channel", "whatsapp", "status")
	if !strings.Contains(out, "connected since ") || !strings.Contains(out, "account:") || !strings.Contains(out, "4915112345678@s.whatsapp.net") {
		t.Errorf("whatsapp status:\n%s", out)
	}
	if code, out, _ = runCLI(t, g, "", "channel", "whatsapp", "unpair"); code != 0 || !strings.Contains(out, "unpaired") {
		t.Errorf("unpair: %d %q", code, out)
	}
}

// TestRenderQR: a WhatsApp-sized code fits an 80-column terminal, two
// module rows a line, black on white; different texts draw differently.
func TestRenderQR(t *testing.T) {
	// A pairing code's shape: ref, then three base64 keys of 44 characters.
	key := "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789+/AbCd="
	text := "2@" + strings.Repeat("Zm9vYmFy", 14) + "," + key + "," + key + "," + key
	art, err := renderQR(text)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(art, "\n"), "\n")
	width := len([]rune(strings.TrimSuffix(strings.TrimPrefix(lines[0], "\x1b[30;47m"), "\x1b[0m")))
	if width > 80 || width < 21+8 || len(lines) != (width+1)/2 {
		t.Fatalf("%d lines of %d columns", len(lines), width)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "\x1b[30;47m") || !strings.HasSuffix(l, "\x1b[0m") {
			t.Fatalf("line without colours: %q", l)
		}
	}
	other, _ := renderQR(text + "x")
	if other == art {
		t.Fatal("two texts, one drawing")
	}
	if _, err := renderQR(""); err == nil {
		t.Fatal("empty text drew a code")
	}
}
