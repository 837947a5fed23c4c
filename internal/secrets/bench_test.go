package secrets

import (
	"context"
	"testing"
)

// What a secret costs to read and write with each kind of provider
// (docs/benchmarks.md, "Credentials"): reads use the data key cached for
// credentials.cache_ttl, so a vault or KMS is asked only by a restarted
// gateway and by writes.
//
//	go test -run '^$' -bench . -benchtime 2000x ./internal/secrets/

const benchValue = "sk-bench-0123456789abcdef0123456789abcdef"

func BenchmarkRevealLocalKeyFile(b *testing.B) {
	ctx := context.Background()
	db, creds := openStore(b)
	s := New(db, creds)
	if err := s.Set(ctx, "K", benchValue); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Reveal(ctx, "K"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRevealVaultCachedDataKey(b *testing.B) {
	ctx := context.Background()
	db, creds := openStore(b)
	v := startVault(b)
	s := vaultStore(b, db, creds, vaultCreds(v), v.Token(), nil)
	if err := s.Set(ctx, "K", benchValue); err != nil {
		b.Fatal(err)
	}
	before := v.Calls("decrypt")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Reveal(ctx, "K"); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(v.Calls("decrypt")-before)/float64(b.N), "vault-calls/op")
}

// A restarted gateway's first read: the data key is unwrapped by Vault
// (transit decrypt over loopback HTTP).
func BenchmarkRevealVaultAfterRestart(b *testing.B) {
	ctx := context.Background()
	db, creds := openStore(b)
	v := startVault(b)
	if err := vaultStore(b, db, creds, vaultCreds(v), v.Token(), nil).Set(ctx, "K", benchValue); err != nil {
		b.Fatal(err)
	}
	stores := make([]*Store, b.N)
	for i := range stores {
		stores[i] = vaultStore(b, db, creds, vaultCreds(v), v.Token(), nil)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := stores[i].Reveal(ctx, "K"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSetVault(b *testing.B) {
	ctx := context.Background()
	db, creds := openStore(b)
	v := startVault(b)
	s := vaultStore(b, db, creds, vaultCreds(v), v.Token(), nil)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := s.Set(ctx, "K", benchValue); err != nil {
			b.Fatal(err)
		}
	}
}
