package skills_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/drivers"
	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/skills"
)

// TestScriptGetsIdempotencyKey: a skill script finds the call's key in
// AGENTRY_IDEMPOTENCY_KEY, as a plain child process and confined, and no
// such variable when the call has none.
func TestScriptGetsIdempotencyKey(t *testing.T) {
	skill := t.TempDir()
	if err := os.WriteFile(filepath.Join(skill, "k.sh"), []byte("#!/bin/sh\necho \"key=${AGENTRY_IDEMPOTENCY_KEY-unset}\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	runners := map[string]skills.Runner{"plain": {Timeout: 30 * time.Second}}
	if j := sandbox.NewJail(sandbox.JailConfig{}); j.Isolation().Confined {
		runners["confined"] = skills.Runner{Timeout: time.Minute, Jail: j}
	}
	t.Logf("runners: %d (confined when bubblewrap isolation is available)", len(runners))
	const key = "00112233445566778899aabbccddeeff"
	for name, r := range runners {
		out := r.Run(drivers.WithIdempotencyKey(context.Background(), key), skill, "k.sh", json.RawMessage(`{}`), false)
		if strings.TrimSpace(out.Stdout) != "key="+key {
			t.Fatalf("%s with a key: %+v", name, out)
		}
		out = r.Run(context.Background(), skill, "k.sh", json.RawMessage(`{}`), false)
		if strings.TrimSpace(out.Stdout) != "key=unset" {
			t.Fatalf("%s without a key: %+v", name, out)
		}
	}
}
