package slack_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakeslack"
	"github.com/agentryhq/agentry/internal/channels"
)

func socketMode(s *channels.Settings) { s.Mode = "socket"; s.SigningSecret = "" }

func TestSocketModeDeliversAndAcksAfterTheSink(t *testing.T) {
	r := newRig(t, socketMode)
	r.receive(t)
	r.waitState(t, channels.StateConnected)
	ev := r.fake.Message("C2", "channel", "U1", "<@U0BOT> deploy status?")
	env := r.fake.Push(ev)
	if err := r.fake.WaitAcked(ctxT(t), env); err != nil {
		t.Fatal(err)
	}
	got := r.sink.all()
	if len(got) != 1 || got[0].MessageID != "C2:"+ev.Inner["ts"].(string) || got[0].Text != "deploy status?" || !got[0].Mentioned {
		t.Fatalf("sink got %+v", got)
	}
	if st := r.fake.Envelope(env); st.Deliveries != 1 || !st.Acked {
		t.Errorf("envelope %+v, want one delivery, acked", st)
	}
	// Socket mode takes no HTTP callbacks.
	if st, _, _ := r.fake.URLVerification(ctxT(t), r.ingress, "x"); st != http.StatusNotFound {
		t.Errorf("ingress in socket mode answered %d", st)
	}
}

func TestSocketModeLeavesAFailedEnvelopeUnackedSoSlackRedelivers(t *testing.T) {
	r := newRig(t, socketMode)
	r.sink.failNext(1)
	r.receive(t)
	r.waitState(t, channels.StateConnected)
	ev := r.fake.Message("D3", "im", "U1", "hello")
	env := r.fake.Push(ev)
	if err := r.fake.WaitAcked(ctxT(t), env); err != nil {
		t.Fatal(err)
	}
	if st := r.fake.Envelope(env); st.Deliveries != 2 {
		t.Errorf("envelope %+v, want a redelivery after the failed sink", st)
	}
	got := r.sink.all()
	if len(got) != 2 || got[0].MessageID != got[1].MessageID {
		t.Fatalf("sink got %+v, want the same message twice", got)
	}
}

func TestSocketModeIgnoresEditsAndAcksThem(t *testing.T) {
	r := newRig(t, socketMode)
	r.receive(t)
	r.waitState(t, channels.StateConnected)
	env := r.fake.Push(r.fake.Message("C2", "channel", "U1", "changed", fakeslack.Subtype("message_changed")))
	if err := r.fake.WaitAcked(ctxT(t), env); err != nil {
		t.Fatal(err)
	}
	if len(r.sink.all()) != 0 || r.status.View().Ignored != 1 {
		t.Errorf("sink %+v status %+v", r.sink.all(), r.status.View())
	}
}

func TestSocketModeReconnectsAfterDisconnectAndDrop(t *testing.T) {
	r := newRig(t, socketMode)
	r.receive(t)
	r.waitState(t, channels.StateConnected)
	r.fake.Disconnect()
	env := r.fake.Push(r.fake.Message("C2", "channel", "U1", "after refresh"))
	if err := r.fake.WaitAcked(ctxT(t), env); err != nil {
		t.Fatal(err)
	}
	r.fake.DropConnections()
	env = r.fake.Push(r.fake.Message("C2", "channel", "U1", "after drop"))
	if err := r.fake.WaitAcked(ctxT(t), env); err != nil {
		t.Fatal(err)
	}
	if got := r.sink.all(); len(got) < 2 || got[len(got)-1].Text != "after drop" {
		t.Fatalf("sink got %+v", got)
	}
}

func TestSocketModeRefusedAppTokenIsUnauthorized(t *testing.T) {
	r := newRig(t, func(s *channels.Settings) { socketMode(s); s.AppToken = "xapp-wrong" })
	done := r.receive(t)
	select {
	case err := <-done:
		var ua *channels.Unauthorized
		if !errors.As(err, &ua) {
			t.Fatalf("Receive returned %v, want Unauthorized", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Receive did not stop on a refused app token")
	}
	if v := r.status.View(); v.State != channels.StateUnauthorized {
		t.Errorf("status %+v", v)
	}
}
