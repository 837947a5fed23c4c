package events

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentryhq/agentry/models"
)

func openStore(t *testing.T) *models.Store {
	t.Helper()
	s, err := models.Open(context.Background(), models.Options{DSN: filepath.Join(t.TempDir(), "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func next(t *testing.T, ch <-chan models.Event) models.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("subscription closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return models.Event{}
}

func publish(t *testing.T, b *Bus, typ, key string, taskID int64) models.Event {
	t.Helper()
	ev := models.NewEvent(typ, key, map[string]any{"k": key})
	ev.TaskID = taskID
	if _, err := b.Publish(context.Background(), &ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func TestSubscribeLiveResumeAndFilter(t *testing.T) {
	s := openStore(t)
	b := New(s, nil)
	b.PollInterval = time.Hour // only Notify may wake the live subscriber
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	old := publish(t, b, "run.started", "old", 1)
	live, err := b.Subscribe(ctx, Filter{TypePrefixes: []string{"run."}}, -1) // new events only
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, "task.created", "skip-me", 1)
	fin := publish(t, b, "run.finished", "fin", 1)
	if got := next(t, live); got.ID != fin.ID {
		t.Fatalf("live got %d (%s), want %d", got.ID, got.Type, fin.ID)
	}
	// A duplicate publish is not delivered again.
	dup := models.NewEvent("run.finished", "fin", nil)
	if ok, err := b.Publish(ctx, &dup); err != nil || ok {
		t.Fatalf("duplicate publish: %v %v", ok, err)
	}

	// Resume after the first event: everything since, in order.
	resumed, err := b.Subscribe(ctx, Filter{TaskID: 1}, old.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a, c := next(t, resumed), next(t, resumed); a.Type != "task.created" || c.ID != fin.ID {
		t.Fatalf("resume got %s then %d", a.Type, c.ID)
	}

	cancel()
	select {
	case _, ok := <-live:
		if ok {
			t.Fatal("event after cancel")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription not closed after cancel")
	}
}

// Events written by another process (another Bus on the same database,
// whose Notify never reaches us) arrive by polling.
func TestSubscribeSeesOtherProcesses(t *testing.T) {
	s := openStore(t)
	reader := New(s, nil)
	reader.PollInterval = 50 * time.Millisecond
	writer := New(s, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, err := reader.Subscribe(ctx, Filter{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	ev := publish(t, writer, "run.started", "elsewhere", 3)
	if got := next(t, ch); got.ID != ev.ID {
		t.Fatalf("got %d, want %d", got.ID, ev.ID)
	}
}
