package config

import (
	"strings"
	"testing"
)

func TestVectorBackend(t *testing.T) {
	for _, tc := range []struct {
		backend, storage string
		wantErr          string
	}{
		{"", "sqlite", ""},
		{"embedded", "sqlite", ""},
		{"postgres", "postgres", ""},
		{"qdrant", "sqlite", `vector.backend: unknown backend "qdrant" (use embedded or postgres)`},
		{"postgres", "sqlite", "vector.backend: postgres keeps vectors on the gateway's PostgreSQL database; it needs storage.backend: postgres"},
		{"embedded", "postgres", "vector.backend: embedded keeps vectors on the gateway's SQLite database"},
		{"", "postgres", ""}, // the default follows the database
	} {
		c := Defaults()
		c.Vector.Backend = tc.backend
		c.Storage.Backend = tc.storage
		if tc.storage == "postgres" {
			c.Storage.DSN = "host=127.0.0.1 dbname=agentry"
		}
		err := Validate(&c)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%q on %s: %v", tc.backend, tc.storage, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%q on %s: err = %v, want %q", tc.backend, tc.storage, err, tc.wantErr)
		}
	}
	var c Config
	if err := Parse([]byte("vector:\n  backend: embedded\n"), "c.yaml", &c); err != nil || c.VectorBackend() != VectorEmbedded {
		t.Fatalf("parse: %v %+v", err, c.Vector)
	}
}
