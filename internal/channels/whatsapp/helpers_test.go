package whatsapp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/types"

	"github.com/agentryhq/agentry/dev/testenv"
	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/internal/channels/channeltest"
	"github.com/agentryhq/agentry/models"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// openGatewayDB opens the gateway's database the way the gateway does
// (models.Open) and returns its pool and driver name.
func openGatewayDB(t *testing.T, driver string) (*sql.DB, string) {
	t.Helper()
	opts := models.Options{Driver: driver, DSN: filepath.Join(t.TempDir(), "agentry.db")}
	if driver == models.DriverPostgres {
		opts.DSN = testenv.Postgres(t)
	}
	st, err := models.Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	db, err := st.DB.DB()
	if err != nil {
		t.Fatal(err)
	}
	return db, st.DriverName()
}

func newAdapter(t *testing.T, db *sql.DB, dialect string, cur channels.Cursors, sink channels.Sink) (*Adapter, *logLines) {
	t.Helper()
	logs := &logLines{}
	ad, err := New(channels.Deps{
		Settings: channels.Settings{ID: "wa", Type: channels.TypeWhatsApp, Enabled: true},
		Sink:     sink, Cursors: cur, Status: &channels.Status{}, Logf: logs.Logf,
	}, db, dialect)
	if err != nil {
		t.Fatal(err)
	}
	return ad.(*Adapter), logs
}

// storeDevice saves a device with fresh keys as if pairing had
// succeeded, and binds it to the channel.
func storeDevice(t *testing.T, a *Adapter, cur *memCursors, user string) types.JID {
	t.Helper()
	ctx := context.Background()
	dev := a.container.NewDevice()
	jid := types.JID{User: user, Server: types.DefaultUserServer, Device: 7}
	dev.ID = &jid
	dev.PushName = "Agentry"
	// What the pair-success stanza would have carried (signatures of the
	// sizes the schema checks).
	dev.Account = &waAdv.ADVSignedDeviceIdentity{
		Details: []byte("details"), AccountSignature: make([]byte, 64),
		AccountSignatureKey: make([]byte, 32), DeviceSignature: make([]byte, 64),
	}
	if err := a.container.PutDevice(ctx, dev); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		if err := cur.SetCursor(ctx, deviceCursor, jid.String()); err != nil {
			t.Fatal(err)
		}
	}
	return jid
}

// fakeWA is a loopback TLS server standing in for web.whatsapp.com up to
// the WebSocket upgrade: it accepts the socket and then closes it
// (closeAfter) or stays silent until the client gives up. The Noise
// handshake beyond that cannot be faked.
type fakeWA struct {
	srv   *httptest.Server
	paths sync.Map
	hits  atomic.Int32
}

func newFakeWA(t *testing.T, silent bool) *fakeWA {
	t.Helper()
	f := &fakeWA{}
	f.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		f.paths.Store(r.Host+r.URL.Path, true)
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		if silent {
			<-r.Context().Done()
			c.CloseNow()
			return
		}
		// Take the client's hello, answer something that is not a Noise
		// server hello (the client's handshake must fail) and let the
		// client close: closing from here while the client writes trips a
		// data race inside whatsmeow's FrameSocket (Close vs SendFrame).
		if _, _, err := c.Read(r.Context()); err != nil {
			return
		}
		// A frame as WhatsApp frames them (3-byte length, then the
		// payload), so the client reads it at once instead of waiting 20 s
		// for the rest of a frame that never comes.
		_ = c.Write(r.Context(), websocket.MessageBinary, []byte{0, 0, 1, 'x'})
		for {
			if _, _, err := c.Read(r.Context()); err != nil {
				return
			}
		}
	}))
	f.srv.EnableHTTP2 = false
	f.srv.StartTLS()
	// Drop the sockets first: Close waits for handlers, and whatsmeow
	// waits 20 s for a handshake answer before it closes its side.
	t.Cleanup(func() { f.srv.CloseClientConnections(); f.srv.Close() })
	return f
}

// client returns an HTTP client that sends every connection (to
// web.whatsapp.com) to the fake, trusting its certificate.
func (f *fakeWA) client() *http.Client {
	pool := x509.NewCertPool()
	pool.AddCert(f.srv.Certificate())
	addr := f.srv.Listener.Addr().String()
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "example.com"},
	}}
}

func (f *fakeWA) saw(hostPath string) bool {
	_, ok := f.paths.Load(hostPath)
	return ok
}

// waitFor polls cond until it holds or the test's bound passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Shared with the other adapters' tests.
type memCursors = channeltest.Cursors
type logLines = channeltest.Logs
