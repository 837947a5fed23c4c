package channels

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/workflows"
)

// TemporalEnqueuer makes an accepted message durable work: a
// signal-with-start of its conversation's ChannelConversation workflow.
// When it returns nil Temporal has stored the message, and the adapter may
// acknowledge it to the platform (store the offset, answer 200): a crash
// after that loses nothing, and a crash before it makes the platform
// deliver the message again, which the conversation recognises by its
// platform identity.
type TemporalEnqueuer struct {
	Client    client.Client
	TaskQueue string
}

// Enqueue implements Enqueuer.
func (e *TemporalEnqueuer) Enqueue(ctx context.Context, channelID, agentID string, m Inbound) error {
	msg := workflows.ChannelMessage{ChannelID: channelID, AgentID: agentID, MessageID: m.MessageID, ChatID: m.ChatID, ThreadID: m.ThreadID,
		Group: m.ChatType != ChatDirect, UserID: m.UserID, Username: m.Username, Text: m.Text, ReplyTo: m.ReplyTo, At: m.At.UTC(),
		Received: time.Now().UTC()}
	id := workflows.ChannelConversationWorkflowID(channelID, m.ChatID, m.ThreadID)
	_, err := e.Client.SignalWithStartWorkflow(ctx, id, workflows.ChannelMessageSignal, msg, client.StartWorkflowOptions{
		ID:                    id,
		TaskQueue:             e.TaskQueue,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		StaticSummary:         "conversation " + m.ChatID + " on " + channelID,
	}, workflows.ChannelConversationWorkflowName, workflows.ChannelConversationInput{ChannelID: channelID, ChatID: m.ChatID, ThreadID: m.ThreadID})
	if err != nil {
		return fmt.Errorf("hand message %s of %s to Temporal: %w", m.MessageID, channelID, err)
	}
	return nil
}
