package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/dev/fakediscord"
	"github.com/agentryhq/agentry/dev/gatewaytest"
)

const (
	discordToken = "e2e-discord-bot-token"
	discordBotID = "900000000000000001"
)

// discordGateway starts a fake Discord and an in-process gateway whose
// discord channel uses it (groups allowed), answered by agent "helper".
func discordGateway(t *testing.T) (*gatewaytest.Gateway, *fakediscord.Server) {
	t.Helper()
	fd, err := fakediscord.Start(discordToken, discordBotID)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fd.Close)
	g := gatewaytest.Start(t, gatewaytest.Options{
		Agents: map[string]string{"helper.yaml": "id: helper\nllm: {provider: ollama, model: llama3.2}\n"},
		Config: fmt.Sprintf(`
channels:
  discord:
    enabled: true
    agent: helper
    bot_token: %q
    api_base_url: %q
    allow_groups: true
`, discordToken, fd.APIBase()),
	})
	waitFor(t, 60*time.Second, "the gateway session", func() bool { return fd.Connected() == 1 })
	return g, fd
}

// discordIDs gives each test its own snowflake-like channel ids (the
// shared Temporal server keeps closed ChannelTurn ids).
func discordIDs(n int) []string {
	base := uint64(time.Now().UnixNano()) % 1_000_000_000 * 1000
	var ids []string
	for i := range n {
		ids = append(ids, fmt.Sprint(600000000000000000+base+uint64(i)))
	}
	return ids
}

// discordSent waits until the bot sent n messages to channel (or within
// passed) and returns their texts.
func discordSent(fd *fakediscord.Server, channel string, n int, within time.Duration) []string {
	deadline := time.Now().Add(within)
	for {
		var got []string
		for _, m := range fd.Sent() {
			if m.ChannelID == channel {
				got = append(got, m.Content)
			}
		}
		if len(got) >= n || time.Now().After(deadline) {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A direct message is answered; in a guild a message mentioning the bot is
// answered and one without is not; the bot's own messages, which Discord
// echoes as MESSAGE_CREATE, never are (no reply loop).
func TestDiscordDirectAndGuildMessages(t *testing.T) {
	g, fd := discordGateway(t)
	ids := discordIDs(3)
	dm, guildChan, guild := ids[0], ids[1], ids[2]
	const alice, bob = "800000000000000001", "800000000000000002"
	fd.Post(dm, "", alice, "hello in private")
	fd.Post(guildChan, guild, bob, "people talking, no bot")
	fd.Post(guildChan, guild, bob, "what is the time", fakediscord.MentionBot())
	if got := discordSent(fd, dm, 1, 60*time.Second); strings.Join(got, "|") != "echo: hello in private" {
		t.Fatalf("DM replies: %q", got)
	}
	if got := discordSent(fd, guildChan, 1, 60*time.Second); strings.Join(got, "|") != "echo: what is the time" {
		t.Fatalf("guild replies: %q", got)
	}
	time.Sleep(time.Second) // an answer to an echo would come now
	if s := fd.Sent(); len(s) != 2 {
		t.Fatalf("%d sent, want 2: %+v", len(s), s)
	}
	// Ignored: the guild message without a mention and the two echoes.
	v := channelViewWhen(t, g, "discord", func(v slackView) bool { return v.Messages.Answered == 2 && v.Adapter.Ignored == 3 })
	if v.Adapter.State != "connected" || v.Messages.Answered != 2 || v.Adapter.Ignored != 3 {
		t.Fatalf("channel view: %+v", v)
	}
}

// A dropped gateway connection resumes (Discord replays what the session
// missed) and the messages posted meanwhile are answered once, in order.
func TestDiscordDroppedConnectionResumes(t *testing.T) {
	_, fd := discordGateway(t)
	dm := discordIDs(1)[0]
	const alice = "800000000000000001"
	fd.Post(dm, "", alice, "before the drop")
	if got := discordSent(fd, dm, 1, 60*time.Second); len(got) != 1 {
		t.Fatalf("before the drop: %q", got)
	}
	identifies := fd.Identifies()
	fd.DropConnections()
	for i := range 3 {
		fd.Post(dm, "", alice, fmt.Sprintf("while away %d", i))
	}
	waitFor(t, 60*time.Second, "a resume", func() bool { return fd.Resumes() >= 1 && fd.Connected() == 1 })
	want := "echo: before the drop|echo: while away 0|echo: while away 1|echo: while away 2"
	if got := discordSent(fd, dm, 4, 60*time.Second); strings.Join(got, "|") != want {
		t.Fatalf("replies: %q", got)
	}
	time.Sleep(time.Second) // a doubled reply would come now
	if got := discordSent(fd, dm, 4, 0); strings.Join(got, "|") != want {
		t.Fatalf("replies: %q", got)
	}
	if n := fd.Identifies(); n != identifies {
		t.Fatalf("identified %d times after the drop: the session was not resumed", n-identifies)
	}
}
