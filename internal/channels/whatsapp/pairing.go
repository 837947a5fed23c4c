package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow"

	"github.com/agentryhq/agentry/internal/channels"
)

// StartPairing links a new companion device: it connects a client for a
// fresh device and, while the phone has not scanned, shows each QR code
// WhatsApp sends in the status (state pairing, detail "qr"; WhatsApp
// rotates codes every 20 s, the first after 60 s, about six in all). On
// success the state is paired with detail "jid" and Receive connects the
// device under its own context; on a timeout or an error the status has
// the error and the state is unpaired. ctx bounds the whole pairing.
func (a *Adapter) StartPairing(ctx context.Context) error {
	dev, err := a.device(ctx)
	if err != nil {
		return err
	}
	if dev != nil && dev.ID != nil {
		return errAlreadyPaired
	}
	a.mu.Lock()
	if a.pairing {
		a.mu.Unlock()
		return errors.New("whatsapp: a pairing is already in progress")
	}
	a.pairing = true
	a.mu.Unlock()

	cli := a.newClient(a.container.NewDevice())
	qrs, err := cli.GetQRChannel(ctx)
	if err != nil {
		a.endPairing()
		return fmt.Errorf("whatsapp: pairing: %w", err)
	}
	a.deps.Status.SetDetail("qr", "")
	a.deps.Status.SetState(channels.StatePairing)
	go a.pair(ctx, cli, qrs)
	return nil
}

func (a *Adapter) endPairing() {
	a.mu.Lock()
	a.pairing = false
	a.mu.Unlock()
}

// pair runs one pairing to its end. It never panics: every outcome is a
// status.
func (a *Adapter) pair(ctx context.Context, cli *whatsmeow.Client, qrs <-chan whatsmeow.QRChannelItem) {
	st := a.deps.Status
	fail := func(err error) {
		cli.Disconnect()
		a.endPairing()
		st.SetDetail("qr", "")
		st.SetError(err)
		st.SetState(channels.StateUnpaired)
	}
	if err := connect(ctx, cli); err != nil {
		fail(fmt.Errorf("whatsapp: pairing: connect: %w", err))
		return
	}
	for {
		select {
		case <-ctx.Done():
			fail(fmt.Errorf("whatsapp: pairing ended before a phone scanned the code: %w", ctx.Err()))
			return
		case item, ok := <-qrs:
			switch {
			case !ok:
				fail(errors.New("whatsapp: pairing ended without a result"))
				return
			case item.Event == whatsmeow.QRChannelEventCode:
				st.SetState(channels.StatePairing)
				st.SetDetail("qr", item.Code)
			case item == whatsmeow.QRChannelSuccess:
				a.paired(cli)
				return
			case item == whatsmeow.QRChannelTimeout:
				fail(errors.New("whatsapp: pairing timed out: no phone scanned the QR code"))
				return
			case item.Event == whatsmeow.QRChannelEventError:
				fail(fmt.Errorf("whatsapp: pairing failed: %w", item.Error))
				return
			default:
				fail(fmt.Errorf("whatsapp: pairing failed: %s", item.Event))
				return
			}
		}
	}
}

// paired records the new device as this channel's and hands it to Receive.
func (a *Adapter) paired(cli *whatsmeow.Client) {
	st := a.deps.Status
	id := cli.Store.ID
	// The pairing client's context ends with the pairing; Receive
	// connects the device again under its own.
	cli.Disconnect()
	a.endPairing()
	st.SetDetail("qr", "")
	if id == nil {
		st.SetError(errors.New("whatsapp: pairing reported success without a device id"))
		st.SetState(channels.StateUnpaired)
		return
	}
	if a.deps.Cursors != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := a.deps.Cursors.SetCursor(ctx, deviceCursor, id.String()); err != nil {
			st.SetError(wrapStore(err))
		}
	}
	st.SetDetail("jid", id.ToNonAD().String())
	st.SetState(channels.StatePaired)
	a.deps.Logf("whatsapp %s: paired as %s", a.deps.Settings.ID, id.ToNonAD())
	a.notify()
}

// Unpair logs the device out (it disappears from the phone's linked
// devices) and deletes it from the store. The device is forgotten here
// even when the logout cannot reach WhatsApp; the error then says to
// remove it on the phone too.
func (a *Adapter) Unpair(ctx context.Context) error {
	dev, err := a.device(ctx)
	if err != nil {
		return err
	}
	if dev == nil || dev.ID == nil {
		a.clearDevice(ctx)
		return nil
	}
	a.mu.Lock()
	cli := a.client
	a.mu.Unlock()
	if cli == nil || cli.Store.ID == nil || *cli.Store.ID != *dev.ID {
		// Not receiving here: connect just to log out.
		cli = a.newClient(dev)
		defer cli.Disconnect()
	}
	var logoutErr error
	if !cli.IsLoggedIn() {
		if err := connect(ctx, cli); err != nil && !errors.Is(err, whatsmeow.ErrAlreadyConnected) {
			logoutErr = err
		} else if !waitLoggedIn(ctx, cli) {
			logoutErr = errors.New("not connected in time")
		}
	}
	if logoutErr == nil {
		logoutErr = cli.Logout(ctx) // deletes the device on success
	}
	// The local forgetting must happen even when the logout used up ctx.
	local, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if logoutErr != nil {
		if err := dev.Delete(local); err != nil {
			return wrapStore(err)
		}
	}
	a.drop()
	a.clearDevice(local)
	if logoutErr != nil {
		return fmt.Errorf("whatsapp: the device is forgotten here, but WhatsApp was not told (%v): remove it under Linked devices on the phone", logoutErr)
	}
	return nil
}

func waitLoggedIn(ctx context.Context, cli *whatsmeow.Client) bool {
	d := 20 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return d > 0 && cli.WaitForConnection(d)
}

func (a *Adapter) clearDevice(ctx context.Context) {
	if a.deps.Cursors != nil {
		if err := a.deps.Cursors.SetCursor(ctx, deviceCursor, ""); err != nil {
			a.deps.Status.SetError(wrapStore(err))
		}
	}
	a.deps.Status.SetDetail("jid", "")
	a.deps.Status.SetState(channels.StateUnpaired)
	a.notify()
}

// connect connects cli within ctx. whatsmeow's Noise handshake waits up to
// 20 s for the server whatever ctx says, so the connection is made in the
// background and abandoned (then disconnected) when ctx ends first.
func connect(ctx context.Context, cli *whatsmeow.Client) error {
	done := make(chan error, 1)
	go func() { done <- cli.ConnectContext(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		go func() { <-done; cli.Disconnect() }()
		return ctx.Err()
	}
}
