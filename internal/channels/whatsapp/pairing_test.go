package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

// Pairing dials WhatsApp's socket (here a loopback stand-in): a socket
// that is not WhatsApp, or one that never answers within the pairing's
// context, ends the pairing with the error in the status, unpaired, no QR
// left, and no panic.
func TestStartPairingWithoutWhatsAppEndsWithAnErrorInTheStatus(t *testing.T) {
	for _, silent := range []bool{false, true} {
		name := map[bool]string{false: "socket closes", true: "socket silent"}[silent]
		t.Run(name, func(t *testing.T) {
			db, dialect := openGatewayDB(t, models.DriverSQLite)
			a, _ := newAdapter(t, db, dialect, &memCursors{}, nil)
			fake := newFakeWA(t, silent)
			a.httpClient = fake.client()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := a.StartPairing(ctx); err != nil {
				t.Fatal(err)
			}
			if err := a.StartPairing(ctx); err == nil || !strings.Contains(err.Error(), "in progress") {
				// The first pairing may already have failed; then a
				// second one is allowed and must be bounded the same way.
				if err != nil {
					t.Fatalf("second StartPairing: %v", err)
				}
			}
			waitFor(t, "the pairing to end", func() bool {
				a.mu.Lock()
				defer a.mu.Unlock()
				return !a.pairing && a.deps.Status.View().LastError != ""
			})
			v := a.deps.Status.View()
			if v.State != channels.StateUnpaired || v.Detail["qr"] != "" || !strings.Contains(v.LastError, "pairing") {
				t.Fatalf("status after a failed pairing: %+v", v)
			}
			if !fake.saw("web.whatsapp.com/ws/chat") {
				t.Fatal("the client did not dial WhatsApp's websocket URL")
			}
			if dev, err := a.device(context.Background()); err != nil || dev != nil {
				t.Fatalf("a failed pairing left a device: %v %v", dev, err)
			}
		})
	}
}

// A paired device that cannot connect: Receive says paired, records the
// error and keeps trying until its context ends, then returns nil.
func TestReceiveKeepsTryingAPairedDeviceUntilCancelled(t *testing.T) {
	db, dialect := openGatewayDB(t, models.DriverSQLite)
	cur := &memCursors{}
	a, _ := newAdapter(t, db, dialect, cur, func(context.Context, channels.Inbound) error { return nil })
	jid := storeDevice(t, a, cur, "15550001111")
	fake := newFakeWA(t, false)
	a.httpClient = fake.client()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Receive(ctx) }()
	waitFor(t, "a connect attempt", func() bool { return fake.hits.Load() >= 1 && a.deps.Status.View().LastError != "" })
	v := a.deps.Status.View()
	if v.State != channels.StatePaired || v.Detail["jid"] != jid.ToNonAD().String() || !strings.Contains(v.LastError, "connect") {
		t.Fatalf("status %+v", v)
	}
	if err := a.Receive(ctx); err == nil {
		t.Fatal("a second Receive on the same adapter was allowed")
	}
	if _, err := a.Send(ctx, channels.Outbound{ChatID: "15552223333@s.whatsapp.net", Text: "hi"}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Send while not connected: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Receive returned %v on cancel", err)
	}
}

func TestReceiveUnpairedWaitsForItsContext(t *testing.T) {
	db, dialect := openGatewayDB(t, models.DriverSQLite)
	a, _ := newAdapter(t, db, dialect, &memCursors{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := a.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if v := a.deps.Status.View(); v.State != channels.StateUnpaired || v.LastError != "" {
		t.Fatalf("status %+v", v)
	}
}

// Unpair without reaching WhatsApp still forgets the device and says to
// remove it on the phone.
func TestUnpairForgetsTheDevice(t *testing.T) {
	db, dialect := openGatewayDB(t, models.DriverSQLite)
	cur := &memCursors{}
	a, _ := newAdapter(t, db, dialect, cur, nil)
	storeDevice(t, a, cur, "15550001111")
	a.httpClient = newFakeWA(t, false).client()
	short, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := a.Unpair(short)
	ctx := context.Background()
	if err == nil || !strings.Contains(err.Error(), "Linked devices") {
		t.Fatalf("Unpair offline: %v", err)
	}
	if v := a.deps.Status.View(); v.State != channels.StateUnpaired || v.Detail["jid"] != "" {
		t.Fatalf("status %+v", v)
	}
	devs, err := a.container.GetAllDevices(ctx)
	if err != nil || len(devs) != 0 {
		t.Fatalf("devices after unpair: %d %v", len(devs), err)
	}
	if c, _ := cur.Cursor(ctx, deviceCursor); c != "" {
		t.Fatalf("device cursor %q after unpair", c)
	}
	if err := a.Unpair(ctx); err != nil {
		t.Fatalf("Unpair when unpaired: %v", err)
	}
}

func TestSendErrors(t *testing.T) {
	db, dialect := openGatewayDB(t, models.DriverSQLite)
	a, _ := newAdapter(t, db, dialect, &memCursors{}, nil)
	ctx := context.Background()
	_, err := a.Send(ctx, channels.Outbound{ChatID: "15552223333@s.whatsapp.net", Text: "hi"})
	if !errors.Is(err, ErrNotConnected) {
		t.Fatalf("Send unpaired: %v", err)
	}
	if f, ok := fault.As(err); !ok || f.Fault().Kind != fault.KindUnavailable {
		t.Fatalf("Send unpaired is not a 503 fault: %v", err)
	}
	var refused *channels.Refused
	for _, m := range []channels.Outbound{
		{ChatID: "not a jid", Text: "hi"},
		{ChatID: "15552223333@s.whatsapp.net", Text: " "},
		{ChatID: "15552223333@s.whatsapp.net", Text: strings.Repeat("x", 65537)},
	} {
		if _, err := a.Send(ctx, m); !errors.As(err, &refused) {
			t.Fatalf("Send %q: %v, want Refused", m.ChatID, err)
		}
	}
	var limited *channels.RateLimited
	for _, e := range []error{whatsmeow.ErrIQRateOverLimit, errors.Join(errors.New("x"), whatsmeow.ErrIQResourceLimit),
		wrapServer(429)} {
		if !errors.As(classify(e), &limited) {
			t.Fatalf("%v not RateLimited", e)
		}
	}
	for _, e := range []error{whatsmeow.ErrUnknownServer, whatsmeow.ErrRecipientADJID, wrapServer(403)} {
		if !errors.As(classify(e), &refused) {
			t.Fatalf("%v not Refused", e)
		}
	}
	for _, e := range []error{whatsmeow.ErrNotConnected, whatsmeow.ErrMessageTimedOut, wrapServer(500)} {
		got := classify(e)
		if errors.As(got, &refused) || errors.As(got, &limited) {
			t.Fatalf("%v classified as final: %v", e, got)
		}
	}
	if l := a.Limits(); l.MaxText != 65536 || l.PerChat != time.Second || l.PerBotPerSecond != 1 {
		t.Fatalf("limits %+v", l)
	}
}

// wrapServer is whatsmeow's error for a message ack carrying an error code.
func wrapServer(code int) error {
	return fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, code)
}
