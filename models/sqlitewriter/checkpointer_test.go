package sqlitewriter

import (
	"log/slog"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// Close stops the loop; a second Close (error paths of Open) is harmless.
func TestCheckpointerStops(t *testing.T) {
	c, err := StartCheckpointer(filepath.Join(t.TempDir(), "agentry.db"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c.Close()
	select {
	case <-c.done:
	default:
		t.Fatal("the checkpoint loop still runs after Close")
	}
}
