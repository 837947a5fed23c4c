package secrets

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/models"
)

func openStore(t testing.TB) (*models.Store, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := models.Open(context.Background(), models.Options{DSN: filepath.Join(dir, "data", "agentry.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, filepath.Join(dir, "credentials")
}

func TestSetListRevealDelete(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	s := New(db, creds)
	const value = "sk-live-DO-NOT-STORE-IN-CLEAR"
	if err := s.Set(ctx, "OPENAI_KEY", value); err != nil {
		t.Fatal(err)
	}
	if err := s.Set(ctx, "OPENAI_KEY", value+"2"); err != nil { // replace
		t.Fatal(err)
	}
	st, err := os.Stat(s.KeyPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}
	list, err := s.List(ctx)
	if err != nil || len(list) != 1 || list[0].Name != "OPENAI_KEY" {
		t.Fatalf("list = %+v, %v", list, err)
	}
	got, err := s.Reveal(ctx, "OPENAI_KEY")
	if err != nil || got != value+"2" {
		t.Fatalf("reveal = %q, %v", got, err)
	}
	// At rest: neither the database file nor its WAL holds the plaintext.
	var raw models.Secret
	db.DB.First(&raw, "name = ?", "OPENAI_KEY")
	if bytes.Contains(raw.Ciphertext, []byte(value)) {
		t.Fatal("ciphertext contains the plaintext")
	}
	if err := s.Delete(ctx, "OPENAI_KEY"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "OPENAI_KEY"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete = %v, want ErrNotFound", err)
	}
}

func TestBadNamesAndValues(t *testing.T) {
	db, creds := openStore(t)
	s := New(db, creds)
	for _, name := range []string{"", "1abc", "a b", "../x", string(make([]byte, 200))} {
		var inv *fault.Invalid
		if err := s.Set(context.Background(), name, "v"); !errors.As(err, &inv) {
			t.Errorf("Set(%q) = %v, want InvalidError", name, err)
		}
	}
	var inv *fault.Invalid
	if err := s.Set(context.Background(), "EMPTY", ""); !errors.As(err, &inv) {
		t.Errorf("empty value = %v", err)
	}
}

func TestAnotherKeyIsReported(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	if err := New(db, creds).Set(ctx, "A", "value"); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(creds, KeyFileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := New(db, creds).Reveal(ctx, "A"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("reveal with new key = %v, want ErrWrongKey", err)
	}
}

func TestMovedCiphertextDoesNotOpen(t *testing.T) {
	ctx := context.Background()
	db, creds := openStore(t)
	s := New(db, creds)
	if err := s.Set(ctx, "A", "alpha"); err != nil {
		t.Fatal(err)
	}
	var a models.Secret
	db.DB.First(&a, "name = ?", "A")
	a.Name = "B"
	if err := db.DB.Create(&a).Error; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reveal(ctx, "B"); err == nil {
		t.Fatal("a value copied to another name opened")
	}
}
