package chat_test

import (
	"testing"

	"github.com/agentryhq/agentry/internal/chat"
	"github.com/agentryhq/agentry/workflows"
)

// Chat delegates with the durable runs' limits (docs/teams.md).
func TestChatPeerLimitsAreTheDurableDefaults(t *testing.T) {
	if chat.MaxPeerDepth != workflows.DefaultPeerMaxDepth || chat.MaxPeerChildren != workflows.DefaultPeerMaxChildren {
		t.Fatalf("chat limits %d/%d, durable %d/%d", chat.MaxPeerDepth, chat.MaxPeerChildren, workflows.DefaultPeerMaxDepth, workflows.DefaultPeerMaxChildren)
	}
}
