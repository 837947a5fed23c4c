// Package whatsapp is the QR-paired WhatsApp channel: a WhatsApp Web
// multi-device companion (a "linked device" of a phone's account) built
// on go.mau.fi/whatsmeow, an unofficial client library. Its device store
// (keys, sessions, contacts) lives in the gateway's own database, in
// whatsmeow's tables (whatsmeow_*), next to the gateway's.
//
// One WhatsApp device holds one connection: a second connection with the
// same keys replaces the first (StreamReplaced). The adapter therefore
// connects only inside Receive and sends through that connection; Send in
// a process that does not receive answers a retryable error (see
// docs/channels/whatsapp.md).
package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/agentryhq/agentry/internal/channels"
)

// deviceCursor is the Cursors key holding the JID of this channel's
// device, so several WhatsApp channels can share one device store.
const deviceCursor = "whatsapp.device"

// Backoff bounds for reconnecting and for retrying the sink.
const (
	minBackoff = time.Second
	maxBackoff = 5 * time.Minute
	// sinkMaxBackoff caps the wait between sink attempts for one message
	// (the sink is Temporal; the message is held unacknowledged meanwhile).
	sinkMaxBackoff = 30 * time.Second
)

var errAlreadyPaired = errors.New("whatsapp: already paired; unpair first")

var setOSOnce sync.Once

// Adapter is one WhatsApp account linked as a companion device.
type Adapter struct {
	deps      channels.Deps
	container *sqlstore.Container
	// httpClient, when set, carries the websocket (tests point it at a
	// loopback server; production uses whatsmeow's own transport).
	httpClient *http.Client

	mu sync.Mutex
	// client is the connected (or connecting) client of the paired device,
	// owned by Receive; nil when unpaired or not receiving.
	client *whatsmeow.Client
	// recvCtx is Receive's context while it runs (nil otherwise): the
	// handler hands messages to the sink under it.
	recvCtx context.Context
	// pairing is true while StartPairing's client runs.
	pairing bool
	// wake tells Receive to look at the device again (paired, unpaired).
	wake chan struct{}
}

var (
	_ channels.Adapter = (*Adapter)(nil)
	_ channels.Pairer  = (*Adapter)(nil)
)

// Factory returns the channels.Factory of WhatsApp adapters whose device
// store is in db (the gateway's database; dialect "sqlite" or "postgres",
// models.Store.DriverName()).
func Factory(db *sql.DB, dialect string) channels.Factory {
	return func(deps channels.Deps) (channels.Adapter, error) { return New(deps, db, dialect) }
}

// New builds the adapter and creates or upgrades whatsmeow's tables in db.
// dialect is the gateway's driver name: "sqlite" (modernc, with
// foreign_keys on, as models.Open opens it) or "postgres" (pgx).
func New(deps channels.Deps, db *sql.DB, dialect string) (channels.Adapter, error) {
	if db == nil {
		return nil, errors.New("whatsapp: no database for the device store")
	}
	switch strings.ToLower(dialect) {
	case "sqlite", "sqlite3", "postgres", "pgx":
	default:
		// sqlstore.NewWithDB panics on a dialect it does not know.
		return nil, fmt.Errorf("whatsapp: device store: unsupported database dialect %q (want sqlite or postgres)", dialect)
	}
	if deps.Status == nil {
		deps.Status = &channels.Status{}
	}
	if deps.Logf == nil {
		deps.Logf = func(string, ...any) {}
	}
	setOSOnce.Do(func() { store.SetOSInfo("Agentry", [3]uint32{1, 0, 0}) })
	c := sqlstore.NewWithDB(db, dialect, logger{deps.Logf, "store"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("whatsapp: create the device store tables: %w", err)
	}
	a := &Adapter{deps: deps, container: c, wake: make(chan struct{}, 1)}
	if dev, err := a.device(ctx); err != nil {
		deps.Status.SetError(err)
	} else {
		a.showDevice(dev)
	}
	return a, nil
}

// Limits: WhatsApp publishes no rate limits for companion devices and bans
// accounts that look like spam, so sends are deliberately slow: one a
// second per chat and one a second overall.
func (a *Adapter) Limits() channels.Limits {
	return channels.Limits{MaxText: 65536, PerChat: time.Second, PerBotPerSecond: 1}
}

// device returns this channel's paired device, nil when unpaired.
func (a *Adapter) device(ctx context.Context) (*store.Device, error) {
	if a.deps.Cursors == nil {
		// No cursor store: one WhatsApp channel per database, its device
		// the first stored.
		devs, err := a.container.GetAllDevices(ctx)
		if err != nil || len(devs) == 0 {
			return nil, wrapStore(err)
		}
		return devs[0], nil
	}
	s, err := a.deps.Cursors.Cursor(ctx, deviceCursor)
	if err != nil || s == "" {
		return nil, wrapStore(err)
	}
	jid, err := types.ParseJID(s)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: stored device id %q: %w", s, err)
	}
	dev, err := a.container.GetDevice(ctx, jid)
	if err != nil {
		return nil, wrapStore(err)
	}
	return dev, nil // nil: the device was deleted (logged out elsewhere)
}

func wrapStore(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("whatsapp: device store: %w", err)
}

// showDevice sets the status from the stored device (not the connection).
func (a *Adapter) showDevice(dev *store.Device) {
	if dev == nil || dev.ID == nil {
		a.deps.Status.SetDetail("jid", "")
		a.mu.Lock()
		pairing := a.pairing
		a.mu.Unlock()
		if !pairing {
			a.deps.Status.SetState(channels.StateUnpaired)
		}
		return
	}
	a.deps.Status.SetDetail("jid", dev.ID.ToNonAD().String())
	a.deps.Status.SetState(channels.StatePaired)
}

func (a *Adapter) notify() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// newClient builds a whatsmeow client for dev with the adapter's event
// handler. Messages are acknowledged only after the handler returns
// (SynchronousAck) and decrypted plaintext is kept until then
// (EnableDecryptedEventBuffer), so a message whose sink failed, or whose
// process died before the sink accepted it, is delivered again.
func (a *Adapter) newClient(dev *store.Device) *whatsmeow.Client {
	cli := whatsmeow.NewClient(dev, logger{a.deps.Logf, "client"})
	cli.SynchronousAck = true
	cli.EnableDecryptedEventBuffer = true
	if a.httpClient != nil {
		cli.SetPreLoginHTTPClient(a.httpClient)
		cli.SetWebsocketHTTPClient(a.httpClient)
	}
	cli.AddEventHandlerWithSuccessStatus(func(evt any) bool { return a.handle(cli, evt) })
	return cli
}

// Receive connects the paired device and keeps it connected until ctx
// ends (whatsmeow reconnects after network errors by itself; the loop
// here reconnects after what whatsmeow gives up on). Unpaired, it waits
// for StartPairing to pair a device. It returns nil when ctx ends.
func (a *Adapter) Receive(ctx context.Context) error {
	a.mu.Lock()
	if a.recvCtx != nil {
		a.mu.Unlock()
		return errors.New("whatsapp: Receive is already running for this channel")
	}
	a.recvCtx = ctx
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		cli := a.client
		a.client, a.recvCtx = nil, nil
		a.mu.Unlock()
		if cli != nil {
			cli.Disconnect()
		}
	}()
	backoff := minBackoff
	for ctx.Err() == nil {
		dev, err := a.device(ctx)
		if err != nil {
			a.deps.Status.SetError(err)
			a.sleep(ctx, &backoff)
			continue
		}
		a.showDevice(dev)
		if dev == nil || dev.ID == nil {
			a.drop()
			a.wait(ctx, 0)
			continue
		}
		cli := a.current(dev)
		if !cli.IsConnected() {
			a.deps.Status.SetState(channels.StatePaired)
			if err := connect(ctx, cli); err != nil && !errors.Is(err, whatsmeow.ErrAlreadyConnected) {
				a.deps.Status.SetError(fmt.Errorf("whatsapp: connect: %w", err))
				a.sleep(ctx, &backoff)
				continue
			}
		}
		backoff = minBackoff
		// Connected (the Connected event sets the state): whatsmeow keeps
		// the connection; look again when told (logged out, replaced) or
		// every minute (a permanent disconnect whatsmeow did not retry).
		a.wait(ctx, time.Minute)
	}
	return nil
}

// current returns the receive client of dev, replacing one of another
// device.
func (a *Adapter) current(dev *store.Device) *whatsmeow.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.client != nil && a.client.Store.ID != nil && *a.client.Store.ID == *dev.ID {
		return a.client
	}
	if a.client != nil {
		go a.client.Disconnect()
	}
	a.client = a.newClient(dev)
	return a.client
}

// drop disconnects and forgets the receive client.
func (a *Adapter) drop() {
	a.mu.Lock()
	cli := a.client
	a.client = nil
	a.mu.Unlock()
	if cli != nil {
		cli.Disconnect()
	}
}

// wait blocks until ctx ends, notify, or d passes (d 0: no timeout).
func (a *Adapter) wait(ctx context.Context, d time.Duration) {
	var tc <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		tc = t.C
	}
	select {
	case <-ctx.Done():
	case <-a.wake:
	case <-tc:
	}
}

func (a *Adapter) sleep(ctx context.Context, backoff *time.Duration) {
	a.wait(ctx, *backoff)
	*backoff = min(*backoff*2, maxBackoff)
}

// handle is the client's event handler. Its result tells whatsmeow
// whether to acknowledge a message (false: no receipt; WhatsApp delivers
// it again on the next connection).
func (a *Adapter) handle(cli *whatsmeow.Client, evt any) bool {
	st := a.deps.Status
	switch e := evt.(type) {
	case *events.Message:
		return a.onMessage(cli, e)
	case *events.Connected:
		st.SetState(channels.StateConnected)
		if id := cli.Store.ID; id != nil {
			st.SetDetail("jid", id.ToNonAD().String())
		}
	case *events.Disconnected:
		st.SetState(channels.StatePaired)
		st.SetError(errors.New("whatsapp: disconnected; reconnecting"))
	case *events.KeepAliveTimeout:
		st.SetError(fmt.Errorf("whatsapp: keepalive timed out %d times", e.ErrorCount))
	case *events.LoggedOut:
		// whatsmeow deletes the device itself; forget it here too.
		st.SetError(fmt.Errorf("whatsapp: logged out by the phone or WhatsApp (%s); pair again", e.Reason))
		a.forget(cli)
	case *events.StreamReplaced:
		st.SetState(channels.StatePaired)
		st.SetError(errors.New("whatsapp: another process connected with this device (stream replaced); run one receiver per channel"))
	case *events.TemporaryBan:
		st.SetState(channels.StateError)
		st.SetError(fmt.Errorf("whatsapp: %s", e.String()))
	case *events.ConnectFailure:
		st.SetError(fmt.Errorf("whatsapp: connect failed: %s %s", e.Reason, e.Message))
	case *events.ClientOutdated:
		st.SetState(channels.StateError)
		st.SetError(errors.New("whatsapp: WhatsApp refused the client as outdated; update Agentry (whatsmeow)"))
	}
	return true
}

// forget clears this channel's device after a logout.
func (a *Adapter) forget(cli *whatsmeow.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if a.deps.Cursors != nil {
		if err := a.deps.Cursors.SetCursor(ctx, deviceCursor, ""); err != nil {
			a.deps.Status.SetError(wrapStore(err))
		}
	}
	a.deps.Status.SetDetail("jid", "")
	a.deps.Status.SetState(channels.StateUnpaired)
	go cli.Disconnect() // not from the handler: Disconnect waits for it
	a.notify()
}

// onMessage converts a message and hands it to the sink, retrying the sink
// until it accepts or Receive ends: whatsmeow handles one message at a
// time, so this keeps each chat's order and sends the delivery receipt
// only after the sink accepted the message.
func (a *Adapter) onMessage(cli *whatsmeow.Client, e *events.Message) bool {
	var self, selfLID types.JID
	if id := cli.Store.ID; id != nil {
		self = id.ToNonAD()
	}
	selfLID = cli.Store.GetLID().ToNonAD()
	in, ignored := toInbound(e, self, selfLID)
	if ignored != "" {
		a.deps.Status.Ignored()
		a.deps.Logf("whatsapp %s: ignored message %s in %s: %s", a.deps.Settings.ID, e.Info.ID, e.Info.Chat, ignored)
		return true
	}
	a.mu.Lock()
	ctx := a.recvCtx
	a.mu.Unlock()
	if ctx == nil || a.deps.Sink == nil {
		// Pairing's client outside Receive: leave it unacknowledged.
		a.deps.Logf("whatsapp %s: message %s arrived while not receiving; left for redelivery", a.deps.Settings.ID, in.MessageID)
		return false
	}
	backoff := minBackoff
	for {
		err := a.deps.Sink(ctx, in)
		if err == nil {
			a.deps.Status.Received()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		a.deps.Status.SetError(fmt.Errorf("whatsapp: message %s not accepted yet: %w", in.MessageID, err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		backoff = min(backoff*2, sinkMaxBackoff)
	}
}
