package voice_test

import (
	"context"
	"testing"

	"github.com/agentryhq/agentry/internal/voice"
)

// BenchmarkMint is what the gateway adds before a browser can talk: the
// worst-case admission, the provider's client-secret request and the
// server-side control connection, against dev/fakerealtime on loopback
// (docs/benchmarks.md, "Voice").
//
//	go test -run '^$' -bench Mint -benchtime 200x ./internal/voice/
func BenchmarkMint(b *testing.B) {
	svc, _ := setup(b, &gate{})
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := svc.Mint(ctx, "talker", voice.Who{Subject: "ana"}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	svc.Close()
}
