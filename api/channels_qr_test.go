package api

import (
	"bytes"
	"context"
	"image/png"
	"io"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	qrcode "github.com/skip2/go-qrcode"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/delivery"
	"github.com/agentryhq/agentry/models"
)

const operatorKey = "operator-key-for-qr-tests"

// pairingAdapter is a QR-paired adapter up to the platform boundary: it
// receives nothing, and pairing shows a code in the status as WhatsApp's
// does (the real one lives in internal/channels/whatsapp).
type pairingAdapter struct {
	status *channels.Status
	mu     sync.Mutex
	paired bool
}

func (a *pairingAdapter) Receive(ctx context.Context) error {
	a.status.SetState(channels.StateUnpaired)
	<-ctx.Done()
	return nil
}
func (a *pairingAdapter) Send(context.Context, channels.Outbound) (channels.Sent, error) {
	return channels.Sent{}, nil
}
func (a *pairingAdapter) Limits() channels.Limits { return channels.Limits{MaxText: 4096} }
func (a *pairingAdapter) StartPairing(context.Context) error {
	a.status.SetState(channels.StatePairing)
	a.status.SetDetail("qr", "2@first-code,abc,def")
	return nil
}
func (a *pairingAdapter) Unpair(context.Context) error {
	a.status.SetState(channels.StateUnpaired)
	a.status.SetDetail("jid", "")
	a.status.SetDetail("qr", "")
	return nil
}

type noEnqueue struct{}

func (noEnqueue) Enqueue(context.Context, string, string, channels.Inbound) error { return nil }

// qrServer is an API server with the channels feature over a real SQLite
// store, a "wa" WhatsApp channel run by pairingAdapter, an admin key
// (testKey) and an operator key.
func qrServer(t *testing.T) (*Server, func() *pairingAdapter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	store, err := models.Open(ctx, models.Options{DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Channels.Messaging = map[string]config.MessagingChannelConfig{
		"wa": {Type: "whatsapp", Enabled: true, Agent: "talker"},
	}
	var mu sync.Mutex
	var adapter *pairingAdapter
	svc := &channels.Service{Config: &cfg, Store: store, Enqueue: noEnqueue{}, Factories: map[string]channels.Factory{
		"whatsapp": func(d channels.Deps) (channels.Adapter, error) {
			mu.Lock()
			defer mu.Unlock()
			adapter = &pairingAdapter{status: d.Status}
			return adapter, nil
		}}}
	svc.Start(ctx)
	t.Cleanup(func() { cancel(); svc.Stop(); store.Close() })
	feature := &ChannelsFeature{Channels: &delivery.Channels{Config: &cfg, Store: store, Messaging: svc}, Messaging: svc,
		Deliveries: &delivery.Service{}, Store: store}
	s := newTestServer(t, func(d *Deps) {
		d.Auth = auth.NewKeyAuthenticator([]auth.APIKey{
			{Key: testKey, Subject: "admin", Role: auth.RoleAdmin},
			{Key: operatorKey, Subject: "ops", Role: auth.RoleOperator}})
		d.Features = []Feature{feature}
	})
	return s, func() *pairingAdapter { mu.Lock(); defer mu.Unlock(); return adapter }
}

func getQR(t *testing.T, s *Server, id, key string) (int, string, []byte) {
	t.Helper()
	req := httptest.NewRequest("GET", "/api/v1/channels/"+id+"/qr.png", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := s.App().Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

func post(t *testing.T, s *Server, path, key string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest("POST", path, nil)
	req.Header.Set("Authorization", "Bearer "+key)
	status, body, _ := do(t, s, req)
	return status, body
}

// wantQR checks that the PNG is the QR code of text (the same encoder, the
// same size): the image follows the status's current code.
func wantQR(t *testing.T, got []byte, text string) {
	t.Helper()
	want, err := qrcode.Encode(text, qrcode.Medium, qrPNGSize)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(got))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != qrPNGSize || b.Dy() != qrPNGSize {
		t.Fatalf("QR image %v, want %dx%d", b, qrPNGSize, qrPNGSize)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the PNG is not the QR code of %q", text)
	}
}

func TestChannelQRPNGWhilePairing(t *testing.T) {
	s, adapter := qrServer(t)
	if status, _, body := getQR(t, s, "wa", testKey); status != 404 || !strings.Contains(string(body), "not pairing") {
		t.Fatalf("before pairing: %d %s", status, body)
	}
	if status, body := post(t, s, "/api/v1/channels/wa/pair", testKey); status != 200 {
		t.Fatalf("pair: %d %v", status, body)
	}
	status, ctype, body := getQR(t, s, "wa", testKey)
	if status != 200 || ctype != "image/png" {
		t.Fatalf("while pairing: %d %q %s", status, ctype, body)
	}
	wantQR(t, body, "2@first-code,abc,def")

	// WhatsApp rotates the code: the image follows.
	adapter().status.SetDetail("qr", "2@second-code,ghi,jkl")
	_, _, body = getQR(t, s, "wa", testKey)
	wantQR(t, body, "2@second-code,ghi,jkl")

	// Paired: no code any more.
	adapter().status.SetState(channels.StatePaired)
	adapter().status.SetDetail("qr", "")
	adapter().status.SetDetail("jid", "15550001111.0:1@s.whatsapp.net")
	if status, _, body := getQR(t, s, "wa", testKey); status != 404 {
		t.Fatalf("after pairing: %d %s", status, body)
	}
}

func TestChannelQRPNGRefusals(t *testing.T) {
	s, _ := qrServer(t)
	if status, body := post(t, s, "/api/v1/channels/wa/pair", testKey); status != 200 {
		t.Fatalf("pair: %d %v", status, body)
	}
	// Whoever scans the code links the device: admin only, like pair.
	if status, _, body := getQR(t, s, "wa", operatorKey); status != 403 || !strings.Contains(string(body), "error") {
		t.Fatalf("operator: %d %s", status, body)
	}
	if status, _, body := getQR(t, s, "wa", "wrong-key"); status != 401 {
		t.Fatalf("wrong key: %d %s", status, body)
	}
	// A channel that is not QR-paired, and one that does not exist.
	for _, id := range []string{"telegram", "webhook", "ghost"} {
		if status, _, body := getQR(t, s, id, testKey); status != 404 || !strings.Contains(string(body), "error") {
			t.Fatalf("%s: %d %s", id, status, body)
		}
	}
}
