package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/agentryhq/agentry/internal/channels"
	"github.com/agentryhq/agentry/models"
)

func countTables(t *testing.T, db *sql.DB, dialect, like string) int {
	t.Helper()
	q := "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name LIKE $1"
	if dialect == models.DriverPostgres {
		q = "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE $1"
	}
	var n int
	if err := db.QueryRow(q, like).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The device store lives in the gateway's own database, beside its tables,
// on the driver the gateway opens (modernc SQLite through its connector,
// or pgx), and a stored device survives a new adapter.
func testDeviceStore(t *testing.T, driver string) {
	db, dialect := openGatewayDB(t, driver)
	gatewayTables := countTables(t, db, dialect, "%")
	if countTables(t, db, dialect, "whatsmeow%") != 0 {
		t.Fatal("whatsmeow tables before New")
	}
	cur := &memCursors{}
	a, _ := newAdapter(t, db, dialect, cur, nil)
	n := countTables(t, db, dialect, "whatsmeow%")
	if n < 10 {
		t.Fatalf("%d whatsmeow tables after New, want its schema (whatsmeow_device, _sessions, ...)", n)
	}
	if got := countTables(t, db, dialect, "%"); got != gatewayTables+n {
		t.Fatalf("tables: %d after New, want the gateway's %d plus whatsmeow's %d", got, gatewayTables, n)
	}
	var version int
	if err := db.QueryRow("SELECT version FROM whatsmeow_version").Scan(&version); err != nil || version == 0 {
		t.Fatalf("whatsmeow_version: %d, %v", version, err)
	}
	if v := a.deps.Status.View(); v.State != channels.StateUnpaired || v.Detail["jid"] != "" {
		t.Fatalf("fresh adapter status %+v, want unpaired without jid", v)
	}

	jid := storeDevice(t, a, cur, "15550001111")
	// A second adapter (a restart) upgrades nothing and finds the device.
	b, _ := newAdapter(t, db, dialect, cur, nil)
	v := b.deps.Status.View()
	if v.State != channels.StatePaired || v.Detail["jid"] != jid.ToNonAD().String() {
		t.Fatalf("status after restart %+v, want paired as %s", v, jid.ToNonAD())
	}
	dev, err := b.device(context.Background())
	if err != nil || dev == nil || dev.ID == nil || *dev.ID != jid {
		t.Fatalf("stored device %v, %v; want %s", dev, err, jid)
	}
	if dev.NoiseKey == nil || dev.IdentityKey == nil {
		t.Fatal("device keys did not survive the store")
	}
	if err := b.StartPairing(context.Background()); !errors.Is(err, errAlreadyPaired) || err.Error() != "whatsapp: already paired; unpair first" {
		t.Fatalf("StartPairing on a paired adapter: %v", err)
	}
	// Another channel (its own cursors) does not see this channel's device.
	c, _ := newAdapter(t, db, dialect, &memCursors{}, nil)
	if v := c.deps.Status.View(); v.State != channels.StateUnpaired {
		t.Fatalf("other channel's status %+v, want unpaired", v)
	}
}

func TestDeviceStoreInTheGatewaySQLite(t *testing.T) { testDeviceStore(t, models.DriverSQLite) }

func TestDeviceStoreInTheGatewayPostgres(t *testing.T) { testDeviceStore(t, models.DriverPostgres) }

func TestNewRefusesAnUnknownDialect(t *testing.T) {
	db, _ := openGatewayDB(t, models.DriverSQLite)
	if _, err := New(channels.Deps{}, db, "mysql"); err == nil {
		t.Fatal("New accepted dialect mysql")
	}
	if _, err := New(channels.Deps{}, nil, "sqlite"); err == nil {
		t.Fatal("New accepted a nil database")
	}
}
