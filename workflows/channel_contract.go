package workflows

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/agent"
)

// The messaging channels' workflows (channel.go; activities in
// activities/channel.go; the ingress that signals them in
// internal/channels).
//
// A conversation (one chat, or one thread of a chat, of one channel) is a
// ChannelConversation workflow: inbound messages are signalled to it with
// signal-with-start, and it handles them one at a time, in the order they
// arrived. Each message becomes a ChannelTurn child workflow whose id is
// the platform's own identity of the message, started with
// REJECT_DUPLICATE: a redelivered message (a restart before the platform
// was acknowledged, a platform retry) joins the work already done instead
// of being answered twice.
const (
	ChannelConversationWorkflowName = "ChannelConversation"
	ChannelTurnWorkflowName         = "ChannelTurn"
	// ChannelMessageSignal carries a ChannelMessage to a conversation.
	ChannelMessageSignal = "channel-message"
	// ChannelConversationIdle ends a conversation workflow after this long
	// without a message (the next message starts a new one; the session
	// and its history are in the database, not in the workflow).
	ChannelConversationIdle = 30 * time.Minute
	// ChannelConversationMaxMessages is how many messages one run of the
	// conversation handles before it continues as new (bounded history).
	ChannelConversationMaxMessages = 100
	// ChannelTurnTimeout bounds the agent run of one message.
	ChannelTurnTimeout = 15 * time.Minute
	// ChannelSendWindow bounds the retries of one reply part (rate limits,
	// platform outages); a 429's retry_after is honoured within it.
	ChannelSendWindow = time.Hour
	// ChannelRetryAfterCap caps the wait a platform's 429 may ask for.
	ChannelRetryAfterCap = 10 * time.Minute

	// ErrTypeChannelRateLimited is a send the platform rate-limited
	// (retried after its retry_after).
	ErrTypeChannelRateLimited = "ChannelRateLimited"
	// ErrTypeChannelRefused is a send the platform will never accept.
	ErrTypeChannelRefused = "ChannelRefused"
	// ErrTypeChannelTurnFailed is a ChannelTurn whose agent run failed.
	ErrTypeChannelTurnFailed = "ChannelTurnFailed"
)

// Activities of the channel workflows (activities.ChannelActivities).
const (
	ActivityChannelTurnPrepare = "ChannelTurnPrepare"
	ActivityChannelLLMTurn     = "ChannelLLMTurn"
	ActivityChannelTool        = "ChannelTool"
	ActivityChannelTurnFinish  = "ChannelTurnFinish"
	ActivityChannelSend        = "ChannelSend"
	ActivityChannelRecord      = "ChannelRecord"
	// A scheduled or API message to a messaging channel: its parts, and
	// the delivery's outcome.
	ActivityChannelDeliveryParts = "ChannelDeliveryParts"
	ActivityChannelDeliveryDone  = "ChannelDeliveryDone"
)

// ChannelDeliveryDone is how a messaging channel's delivery ended.
type ChannelDeliveryDone struct {
	Delivery    DeliveryInput `json:"delivery"`
	Delivered   bool          `json:"delivered"`
	Error       string        `json:"error,omitempty"`
	PlatformIDs []string      `json:"platform_ids,omitempty"`
}

// ChannelMessage is an inbound message accepted by a channel: what the
// activation rules let through, text already stripped of the trigger.
type ChannelMessage struct {
	ChannelID string    `json:"channel_id"`
	AgentID   string    `json:"agent_id"`
	MessageID string    `json:"message_id"`
	ChatID    string    `json:"chat_id"`
	ThreadID  string    `json:"thread_id,omitempty"`
	Group     bool      `json:"group,omitempty"`
	UserID    string    `json:"user_id"`
	Username  string    `json:"username,omitempty"`
	Text      string    `json:"text"`
	ReplyTo   string    `json:"reply_to,omitempty"`
	At        time.Time `json:"at"`
	// Received is when the gateway accepted it (latency figures).
	Received time.Time `json:"received"`
}

// ChannelConversationWorkflowID names a conversation's workflow: readable
// in the Web UI (channel, chat, thread).
func ChannelConversationWorkflowID(channelID, chatID, threadID string) string {
	id := "channel-" + channelID + "-" + chatID
	if threadID != "" {
		id += "-" + threadID
	}
	return id
}

// ChannelTurnWorkflowID names the work of one inbound message: from the
// platform's identity of the message, so its redelivery is the same work.
func ChannelTurnWorkflowID(channelID, messageID string) string {
	return "channelmsg-" + channelID + "-" + messageID
}

// ChannelSessionID is the chat session of a conversation: history
// continues per channel, chat and thread.
func ChannelSessionID(channelID, chatID, threadID string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{channelID, chatID, threadID}, "\x00")))
	return "channel-" + channelID + "-" + hex.EncodeToString(h[:10])
}

// ChannelConversationInput starts (or continues) a conversation.
type ChannelConversationInput struct {
	ChannelID string `json:"channel_id"`
	ChatID    string `json:"chat_id"`
	ThreadID  string `json:"thread_id,omitempty"`
	// Carried across continue-as-new: messages not yet handled, and the
	// ids of the last ones handled (a redelivery that arrives within the
	// window is dropped without starting a child).
	Pending []ChannelMessage `json:"pending,omitempty"`
	Recent  []string         `json:"recent,omitempty"`
}

// ChannelTurnInput is one message's work.
type ChannelTurnInput struct {
	Message ChannelMessage `json:"message"`
	// Timeout overrides ChannelTurnTimeout (tests).
	Timeout time.Duration `json:"timeout,omitempty"`

	// Carried across continue-as-new.
	Prepared     *ChannelPrepared  `json:"prepared,omitempty"`
	Deadline     time.Time         `json:"deadline,omitempty"`
	Continuation *agent.Checkpoint `json:"continuation,omitempty"`
}

// ChannelPrepared is the resolved run of a message.
type ChannelPrepared struct {
	Run           RunRef        `json:"run"`
	Agent         agent.Input   `json:"agent"`
	SessionID     string        `json:"session_id"`
	ToolTimeout   time.Duration `json:"tool_timeout,omitempty"`
	LocalLLMTurns bool          `json:"local_llm_turns,omitempty"`
}

// ChannelFinishInput is how a message's run ended.
type ChannelFinishInput struct {
	In     ChannelTurnInput `json:"in"`
	Run    RunRef           `json:"run"`
	Failed bool             `json:"failed,omitempty"`
	Error  string           `json:"error,omitempty"`
	Turns  int              `json:"turns"`
}

// ChannelFinished is the reply to send, already split to the platform's
// length limit.
type ChannelFinished struct {
	Parts []string `json:"parts"`
}

// ChannelSendInput is one part of a reply (or of a scheduled message).
type ChannelSendInput struct {
	ChannelID string `json:"channel_id"`
	ChatID    string `json:"chat_id"`
	ThreadID  string `json:"thread_id,omitempty"`
	ReplyTo   string `json:"reply_to,omitempty"`
	Group     bool   `json:"group,omitempty"`
	Text      string `json:"text"`
	// Key names the part for logs: "<message id>/<part>" or the delivery.
	Key string `json:"key"`
}

// ChannelSent is a part the platform accepted.
type ChannelSent struct {
	PlatformID string `json:"platform_id"`
}

// ChannelRecordInput records what became of an inbound message.
type ChannelRecordInput struct {
	Message  ChannelMessage `json:"message"`
	Status   string         `json:"status"`
	RunID    string         `json:"run_id,omitempty"`
	ReplyIDs []string       `json:"reply_ids,omitempty"`
	Error    string         `json:"error,omitempty"`
}
