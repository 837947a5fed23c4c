package secrets

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/secrets/seed"
)

// A seed left by onboard is sealed into the store at start and its file
// removed; a seed that cannot be stored stays for the next start.
func TestImportSeedsSealsAndRemoves(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	s := New(db, creds)
	if err := seed.Write(creds, "llm-openai", "sk-seeded-1234\n"); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(seed.Dir(creds), "llm-openai"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("seed mode = %v, %v; want 0600", st, err)
	}
	// A name no secret can have is refused when written...
	if err := seed.Write(creds, "../escape", "x"); err == nil {
		t.Fatal("WriteSeed accepted a name with a path in it")
	}
	// ...and left in place (named in the error) when planted by hand.
	bad := filepath.Join(seed.Dir(creds), "9bad")
	if err := os.WriteFile(bad, []byte("v"), 0o600); err != nil {
		t.Fatal(err)
	}
	names, err := s.ImportSeeds(ctx, creds)
	if err == nil || !strings.Contains(err.Error(), "9bad") {
		t.Fatalf("import error = %v; want it to name the bad seed", err)
	}
	if len(names) != 1 || names[0] != "llm-openai" {
		t.Fatalf("imported %v", names)
	}
	if got, err := s.Reveal(ctx, "llm-openai"); err != nil || got != "sk-seeded-1234" {
		t.Fatalf("reveal = %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(seed.Dir(creds), "llm-openai")); !os.IsNotExist(err) {
		t.Fatalf("the imported seed's file is still there: %v", err)
	}
	if _, err := os.Stat(bad); err != nil {
		t.Fatalf("the refused seed was removed: %v", err)
	}
	// Nothing left to import: a second start changes nothing.
	os.Remove(bad)
	if names, err := s.ImportSeeds(ctx, creds); err != nil || len(names) != 0 {
		t.Fatalf("second import = %v, %v", names, err)
	}
}
