package browser

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentryhq/agentry/api"
	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/console"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/models"
)

// The channels page against the real API server, channels service and
// SQLite store, with the console's embedded files. WhatsApp's side is an
// adapter that pairs the way whatsmeow reports it (state pairing, the code
// in detail "qr", then paired with a jid) without the network: a real
// WhatsApp account cannot be scanned in a test.

const (
	channelsAdminKey    = "console-channels-admin-key"
	channelsOperatorKey = "console-channels-operator-key"
	firstCode           = "2@first-pairing-code,AbC,dEf"
	secondCode          = "2@second-pairing-code,GhI,jKl"
	pairedJID           = "15550001111:7@s.whatsapp.net"
)

type waFake struct{ status *channels.Status }

func (a *waFake) Receive(ctx context.Context) error {
	a.status.SetState(channels.StateUnpaired)
	<-ctx.Done()
	return nil
}
func (a *waFake) Send(context.Context, channels.Outbound) (channels.Sent, error) {
	return channels.Sent{}, nil
}
func (a *waFake) Limits() channels.Limits { return channels.Limits{MaxText: 4096} }
func (a *waFake) StartPairing(context.Context) error {
	a.status.SetState(channels.StatePairing)
	a.status.SetDetail("qr", firstCode)
	return nil
}
func (a *waFake) Unpair(context.Context) error {
	a.status.SetState(channels.StateUnpaired)
	a.status.SetDetail("jid", "")
	return nil
}

type acceptAll struct{}

func (acceptAll) Enqueue(context.Context, string, string, channels.Inbound) error { return nil }

// channelsConsole serves the console and the channels API on loopback.
func channelsConsole(t *testing.T) (base string, store *models.Store, wa func() *waFake) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store, err := models.Open(ctx, models.Options{DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Channels.Messaging = map[string]config.MessagingChannelConfig{
		"wa": {Type: "whatsapp", Enabled: true, Agent: "talker"},
		// No telegram adapter in this service: the channel's status says so.
		"tg": {Type: "telegram", Enabled: true, Agent: "talker", Mode: "webhook", BotToken: "123456:very-secret-token", SecretToken: "hook-secret"},
	}
	var mu sync.Mutex
	var adapter *waFake
	svc := &channels.Service{Config: &cfg, Store: store, Enqueue: acceptAll{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Factories: map[string]channels.Factory{"whatsapp": func(d channels.Deps) (channels.Adapter, error) {
			mu.Lock()
			defer mu.Unlock()
			adapter = &waFake{status: d.Status}
			return adapter, nil
		}}}
	svc.Start(ctx)
	s := api.New(api.Deps{
		Config: &config.Loaded{Config: cfg},
		Auth: auth.NewKeyAuthenticator([]auth.APIKey{
			{Key: channelsAdminKey, Subject: "admin", Role: auth.RoleAdmin},
			{Key: channelsOperatorKey, Subject: "ops", Role: auth.RoleOperator}}),
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Console: console.Assets(),
		Features: []api.Feature{&api.ChannelsFeature{Channels: &delivery.Channels{Config: &cfg, Store: store, Messaging: svc},
			Messaging: svc, Deliveries: &delivery.Service{}, Store: store}},
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s.Serve(ln)
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		s.Shutdown(sctx)
		cancel()
		svc.Stop()
		store.Close()
	})
	return "http://" + ln.Addr().String(), store, func() *waFake { mu.Lock(); defer mu.Unlock(); return adapter }
}

func TestConsoleChannels(t *testing.T) {
	chrome := testenv.Chromium(t)
	base, store, wa := channelsConsole(t)
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	answered := now.Add(-time.Minute)
	for _, m := range []*models.ChannelMessage{
		{ChannelID: "wa", MessageID: "3EB0A1", ChatID: "15552223333@s.whatsapp.net", UserID: "15552223333@s.whatsapp.net",
			Status: models.ChannelMessageAnswered, RunID: "channel-run-wa-3EB0A1", ReplyIDs: "3EB0R1,3EB0R2", ReceivedAt: now.Add(-2 * time.Minute), AnsweredAt: &answered},
		{ChannelID: "wa", MessageID: "3EB0A2", ChatID: "15552223333@s.whatsapp.net", UserID: "15552223333@s.whatsapp.net",
			Status: models.ChannelMessageFailed, Error: "the agent's model refused: budget exhausted", ReceivedAt: now.Add(-time.Minute)},
	} {
		if err := store.RecordChannelMessage(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	s := newSession(t, chrome, base)

	steps := []struct {
		name string
		fn   func(t *testing.T)
	}{
		{"ListsEveryChannel", func(t *testing.T) {
			s.do(t, 30*time.Second, "sign in and open the channels page",
				chromedp.Navigate(base+"/#/channels"), chromedp.WaitVisible("#credential"),
				chromedp.SendKeys("#credential", channelsAdminKey), chromedp.Click("#signin-form button"),
				chromedp.WaitVisible(`#channels[data-ready="true"] tr[data-channel="wa"]`))
			var ids []string
			s.eval(t, `[...document.querySelectorAll("#channels tbody tr")].map(r => r.dataset.channel)`, &ids)
			if got := strings.Join(ids, ","); got != "webhook,discord,slack,telegram,tg,wa,whatsapp" {
				t.Fatalf("channels listed: %s", got)
			}
			row := `#channels tr[data-channel="wa"] `
			if r, a, f := s.text(t, row+"td.received"), s.text(t, row+"td.answered"), s.text(t, row+"td.failed"); r != "2" || a != "1" || f != "1" {
				t.Fatalf("wa counts: received %q answered %q failed %q", r, a, f)
			}
			if last := s.text(t, row+"td.last"); !strings.Contains(last, "15552223333@s.whatsapp.net") || !strings.Contains(last, "failed") {
				t.Fatalf("wa last message: %q", last)
			}
			if e := s.text(t, row+"td.last-error .error"); !strings.Contains(e, "budget exhausted") {
				t.Fatalf("wa last error: %q", e)
			}
			if st := s.text(t, row+"td.adapter"); !strings.Contains(st, "unpaired") || !strings.Contains(st, "since") {
				t.Fatalf("wa adapter: %q", st)
			}
			// The service has no telegram adapter: its status says so, highlighted.
			if e := s.text(t, `#channels tr[data-channel="tg"] td.last-error .error`); !strings.Contains(e, "no telegram adapter in this build") {
				t.Fatalf("tg last error: %q", e)
			}
			s.screenshot(t, "channels")
		}},
		{"DisableAndEnable", func(t *testing.T) {
			s.do(t, 20*time.Second, "disable tg",
				chromedp.Click(`button[data-channel="tg"][data-action="disable"]`),
				chromedp.WaitVisible(`button[data-channel="tg"][data-action="enable"]`))
			if set, _, err := channelSettings(store, "tg"); err != nil || !strings.Contains(set, `"enabled":false`) {
				t.Fatalf("tg settings after disable: %s %v", set, err)
			}
			s.do(t, 20*time.Second, "enable tg again",
				chromedp.Click(`button[data-channel="tg"][data-action="enable"]`),
				chromedp.WaitVisible(`button[data-channel="tg"][data-action="disable"]`))
		}},
		{"DetailShowsRedactedSettingsAndTheIngressURL", func(t *testing.T) {
			s.do(t, 20*time.Second, "open tg",
				chromedp.Click(`#channels tr[data-channel="tg"] th a`), chromedp.WaitVisible(`#channel-summary[data-ready="true"]`),
				chromedp.WaitVisible(`#channel-settings dd[data-key="bot_token"]`))
			if v := s.text(t, `#channel-settings dd[data-key="bot_token"]`); v != config.Redacted {
				t.Fatalf("bot_token shown as %q", v)
			}
			if u := s.text(t, "#channel-ingress code"); u != base+"/ingress/tg" {
				t.Fatalf("ingress URL %q, want %s", u, base+"/ingress/tg")
			}
			var html string
			s.eval(t, `document.documentElement.outerHTML`, &html)
			if strings.Contains(html, "very-secret-token") || strings.Contains(html, "hook-secret") {
				t.Fatal("a credential reached the page")
			}
		}},
		{"DetailShowsRecentMessages", func(t *testing.T) {
			s.do(t, 20*time.Second, "open wa",
				chromedp.Navigate(base+"/#/channels/wa"), chromedp.WaitVisible(`#channel-message-table tr[data-message="3EB0A2"]`))
			ok := `#channel-message-table tr[data-message="3EB0A1"] `
			if st, run, replies := s.text(t, ok+"td:nth-child(4)"), s.text(t, ok+"td.run"), s.text(t, ok+"td:nth-child(6)"); st != "answered" ||
				run != "channel-run-wa-3EB0A1" || replies != "3EB0R1, 3EB0R2" {
				t.Fatalf("answered message: status %q run %q replies %q", st, run, replies)
			}
			if e := s.text(t, `#channel-message-table tr[data-message="3EB0A2"] td .error`); !strings.Contains(e, "budget exhausted") {
				t.Fatalf("failed message error %q", e)
			}
			if p := s.text(t, `#channel-settings p`); !strings.Contains(p, "no URL to register") {
				t.Fatalf("a channel on its own connection: %q", p)
			}
		}},
		{"PairShowsTheQRCodeAsItRotates", func(t *testing.T) {
			s.do(t, 30*time.Second, "pair",
				chromedp.WaitVisible(`#channel-pair:not([disabled])`), chromedp.Click("#channel-pair"),
				chromedp.WaitVisible(fmt.Sprintf(`#channel-qr[data-code=%q]`, firstCode)))
			s.waitFor(t, 20*time.Second, "the QR image loads", `document.getElementById("channel-qr").complete && document.getElementById("channel-qr").naturalWidth === 320`)
			var src string
			s.do(t, 10*time.Second, "image source", chromedp.AttributeValue("#channel-qr", "src", &src, nil))
			if !strings.HasPrefix(src, "blob:") {
				t.Fatalf("QR image from %q, want a blob of the gateway's PNG", src)
			}
			s.screenshot(t, "channel-pairing")
			wa().status.SetDetail("qr", secondCode)
			s.do(t, 20*time.Second, "the image follows the new code",
				chromedp.WaitVisible(fmt.Sprintf(`#channel-qr[data-code=%q]`, secondCode)))
			wa().status.SetState(channels.StatePaired)
			wa().status.SetDetail("qr", "")
			wa().status.SetDetail("jid", pairedJID)
			s.do(t, 20*time.Second, "paired", chromedp.WaitVisible("#channel-paired"), chromedp.WaitNotPresent("#channel-qr"),
				chromedp.WaitVisible("#channel-unpair"))
			if p := s.text(t, "#channel-paired"); p != "Paired as "+pairedJID {
				t.Fatalf("paired text %q", p)
			}
		}},
		{"AnOperatorCannotPair", func(t *testing.T) {
			s.do(t, 30*time.Second, "sign in as an operator",
				chromedp.Evaluate(fmt.Sprintf(`sessionStorage.setItem("agentry.credential", %q)`, channelsOperatorKey), nil), chromedp.Reload(),
				chromedp.WaitVisible(`#channel-summary[data-ready="true"]`), chromedp.WaitVisible("#channel-pairing:not([hidden])"))
			var disabled bool
			s.eval(t, `document.querySelector("#channel-pairing button").disabled`, &disabled)
			if !disabled {
				t.Fatal("the pairing button is enabled for an operator")
			}
			if p := s.text(t, "#channel-pairing p.muted"); !strings.Contains(p, "admin role") {
				t.Fatalf("operator note %q", p)
			}
		}},
		{"NothingLoadsFromOutsideTheGateway", func(t *testing.T) {
			for _, r := range s.seen() {
				if strings.Contains(r.URL, channelsAdminKey) || strings.Contains(r.URL, channelsOperatorKey) {
					t.Errorf("credential in a URL: %s", r.URL)
				}
				if !strings.HasPrefix(r.URL, base+"/") && !strings.HasPrefix(r.URL, "blob:") && !strings.HasPrefix(r.URL, "data:") {
					t.Errorf("request outside the gateway: %s %s", r.Method, r.URL)
				}
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.jsErrors) > 0 {
				t.Errorf("JavaScript errors: %v", s.jsErrors)
			}
		}},
	}
	for _, st := range steps {
		if !t.Run(st.name, st.fn) {
			t.Fatalf("step %s failed; the later steps build on it", st.name)
		}
	}
}

// channelSettings reads a channel's stored API changes.
func channelSettings(store *models.Store, id string) (string, string, error) {
	row, err := store.GetChannelSetting(context.Background(), id)
	if err != nil {
		return "", "", err
	}
	return row.Settings, row.SecretKeys, nil
}
