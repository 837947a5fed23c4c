package agentry

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// adapter is a per-adapter namespace: `agentry channel <name> ...`. The id
// of the channel is the adapter's name (config.yaml may add more ids of a
// type; `channel status|enable|disable|update ID` reach those).
type adapter struct {
	name  string
	short string
	// messaging adapters take the shared chat flags (--trigger,
	// --allow-groups, --allowed-chats, --allowed-users) and --agent, --mode.
	messaging bool
	// modes are the receive modes, the default first (docs/channels/).
	modes []string
	// credentials are the secret settings the adapter takes, each with
	// a flag of the same name (bot_token: --bot-token).
	credentials []credential
	// publicURL: the adapter has a webhook mode that needs public_url.
	publicURL bool
	// pairing: QR-paired (pair, unpair).
	pairing bool
}

type credential struct{ key, help string }

func (c credential) flag() string { return strings.ReplaceAll(c.key, "_", "-") }

var (
	botToken      = credential{"bot_token", "the bot token"}
	secretToken   = credential{"secret_token", "webhook mode: the X-Telegram-Bot-Api-Secret-Token value (1-256 of A-Z a-z 0-9 _ -)"}
	signingSecret = credential{"signing_secret", "Events API mode: the app's signing secret"}
	appToken      = credential{"app_token", "Socket Mode: the app-level token (xapp-...)"}
)

// adapters are the channel types with their own namespace; the gateway
// checks every value and rejects keys it does not know.
var adapters = []adapter{
	{name: "webhook", short: "Outbound webhook channel (channels.webhook)"},
	{name: "telegram", short: "Telegram bot channel (docs/channels/telegram.md)", messaging: true,
		modes: []string{"polling", "webhook"}, credentials: []credential{botToken, secretToken}, publicURL: true},
	{name: "slack", short: "Slack app channel (docs/channels/slack.md)", messaging: true,
		modes: []string{"events", "socket"}, credentials: []credential{botToken, signingSecret, appToken}},
	{name: "discord", short: "Discord bot channel (docs/channels/discord.md)", messaging: true,
		modes: []string{"gateway"}, credentials: []credential{botToken}},
	{name: "whatsapp", short: "WhatsApp channel paired by QR code (WhatsApp Web multi-device)", messaging: true,
		modes: []string{"web"}, pairing: true},
}

// configureFlags are the values of `channel <adapter> configure`.
type configureFlags struct {
	sets, headers, allowedChats, allowedUsers []string
	url, method, trigger, agent, mode         string
	apiBaseURL, publicURL, secretFile         string
	secretStdin, allowGroups, enable          bool
	creds                                     map[string]*string // key -> value on the command line
	credStdin                                 map[string]*bool
	credFile                                  map[string]*string
}

// adapterCommand is `channel <adapter> status|enable|disable|configure`
// (and pair|unpair for a QR-paired adapter).
func (a *App) adapterCommand(ad adapter) *cobra.Command {
	cf := &configureFlags{creds: map[string]*string{}, credStdin: map[string]*bool{}, credFile: map[string]*string{}}
	configure := &cobra.Command{
		Use:   "configure [flags]",
		Short: "Change the " + ad.name + " channel's settings (--enable also starts it)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := a.configureSettings(cmd, ad, cf)
			if err != nil {
				return err
			}
			return a.updateChannel(cmd, ad.name, settings)
		},
	}
	f := configure.Flags()
	f.StringArrayVar(&cf.sets, "set", nil, "other key=value to set (repeatable)")
	f.BoolVar(&cf.enable, "enable", false, "also set enabled: true (configure and start the channel in one call)")
	if ad.name == "webhook" {
		f.StringVar(&cf.url, "url", "", "destination URL")
		f.StringVar(&cf.method, "method", "", "HTTP method (POST)")
		f.StringArrayVar(&cf.headers, "header", nil, "\"Name: value\" header line sent with every request (repeatable; replaces all header lines)")
		f.BoolVar(&cf.secretStdin, "secret-stdin", false, "read the signing secret from standard input")
		f.StringVar(&cf.secretFile, "secret-file", "", "read the signing secret from a file")
	}
	if ad.messaging {
		f.StringVar(&cf.agent, "agent", "", "the agent that answers this channel's messages")
		f.StringVar(&cf.mode, "mode", "", "how the channel receives: "+strings.Join(append([]string{ad.modes[0] + " (default)"}, ad.modes[1:]...), " or "))
		f.StringVar(&cf.apiBaseURL, "api-base-url", "", "the platform API root (a self-hosted server, a test fake); empty: the platform's")
		f.StringVar(&cf.trigger, "trigger", "", "in groups, the phrase that makes the agent answer (stripped); a mention always does")
		f.BoolVar(&cf.allowGroups, "allow-groups", false, "answer in group chats (--allow-groups=false turns it off)")
		f.StringSliceVar(&cf.allowedChats, "allowed-chats", nil, "chat ids the channel answers in (comma-separated or repeated; empty: any)")
		f.StringSliceVar(&cf.allowedUsers, "allowed-users", nil, "user ids the channel answers (comma-separated or repeated; empty: any)")
	}
	if ad.publicURL {
		f.StringVar(&cf.publicURL, "public-url", "", "webhook mode: the HTTPS URL the platform posts to, i.e. <gateway>/ingress/"+ad.name+" as the internet reaches it")
	}
	for _, c := range ad.credentials {
		cf.creds[c.key] = f.String(c.flag(), "", c.help+" (a value on the command line is visible to other local users; prefer --"+c.flag()+"-stdin or --"+c.flag()+"-file; \"\" clears it)")
		cf.credStdin[c.key] = f.Bool(c.flag()+"-stdin", false, "read the "+strings.ReplaceAll(c.key, "_", " ")+" from standard input")
		cf.credFile[c.key] = f.String(c.flag()+"-file", "", "read the "+strings.ReplaceAll(c.key, "_", " ")+" from a file")
	}
	children := []*cobra.Command{
		a.channelStatusCommand("status", ad.name),
		a.channelToggleCommand("enable", ad.name, true),
		a.channelToggleCommand("disable", ad.name, false),
		configure,
	}
	if ad.messaging {
		children = append(children, a.channelMessagesFixed(ad.name))
	}
	if ad.pairing {
		children = append(children, a.pairCommand(ad.name), a.unpairCommand(ad.name))
	}
	return group(ad.name, ad.short, children...)
}

// configureSettings maps configure's flags to the PATCH body: only the
// flags given, credentials read from a flag, standard input or a file.
func (a *App) configureSettings(cmd *cobra.Command, ad adapter, cf *configureFlags) (map[string]any, error) {
	settings, err := parseSets(cf.sets)
	if err != nil {
		return nil, err
	}
	f := cmd.Flags()
	if ad.name == "webhook" {
		if f.Changed("url") {
			settings["url"] = cf.url
		}
		if f.Changed("method") {
			settings["method"] = strings.ToUpper(cf.method)
		}
		if f.Changed("header") {
			for _, h := range cf.headers {
				if !strings.Contains(h, ":") {
					return nil, usagef("--header %q: expected \"Name: value\"", h)
				}
			}
			settings["headers"] = strings.Join(cf.headers, "\n")
		}
		if cf.secretStdin && cf.secretFile != "" {
			return nil, usagef("use one of --secret-stdin and --secret-file")
		}
		if cf.secretStdin || cf.secretFile != "" {
			v, err := a.readSecretValue(cf.secretFile, "webhook signing secret")
			if err != nil {
				return nil, err
			}
			settings["secret"] = v
		}
	}
	if ad.messaging {
		for _, s := range []struct{ flag, key, v string }{{"agent", "agent", cf.agent}, {"mode", "mode", cf.mode},
			{"api-base-url", "api_base_url", cf.apiBaseURL}, {"trigger", "trigger", cf.trigger}, {"public-url", "public_url", cf.publicURL}} {
			if f.Changed(s.flag) {
				settings[s.key] = s.v
			}
		}
		if f.Changed("allow-groups") {
			settings["allow_groups"] = cf.allowGroups
		}
		if f.Changed("allowed-chats") {
			settings["allowed_chats"] = nonNilList(cf.allowedChats)
		}
		if f.Changed("allowed-users") {
			settings["allowed_users"] = nonNilList(cf.allowedUsers)
		}
	}
	// Check every credential's flags before reading any: standard input
	// holds one value, and a refused command must read nothing.
	stdinUsed := ""
	for _, c := range ad.credentials {
		fl := c.flag()
		given := 0
		for _, name := range []string{fl, fl + "-stdin", fl + "-file"} {
			if f.Changed(name) {
				given++
			}
		}
		if given > 1 {
			return nil, usagef("use one of --%s, --%s-stdin and --%s-file", fl, fl, fl)
		}
		if *cf.credStdin[c.key] {
			if stdinUsed != "" {
				return nil, usagef("--%s-stdin and --%s-stdin: standard input holds one value; read the other from a file", stdinUsed, fl)
			}
			stdinUsed = fl
		}
	}
	for _, c := range ad.credentials {
		switch {
		case f.Changed(c.flag()):
			settings[c.key] = *cf.creds[c.key]
		case *cf.credStdin[c.key] || *cf.credFile[c.key] != "":
			v, err := a.readSecretValue(*cf.credFile[c.key], ad.name+" "+strings.ReplaceAll(c.key, "_", " "))
			if err != nil {
				return nil, err
			}
			settings[c.key] = v
		}
	}
	if cf.enable {
		settings["enabled"] = true
	}
	if len(settings) == 0 {
		return nil, usagef("channel %s configure: nothing to change (see --help)", ad.name)
	}
	return settings, nil
}

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// isMessaging tells a messaging channel's view (it has an adapter state)
// from the webhook channel's.
func isMessaging(ch *openapi.Channel) bool {
	return ch.Adapter.State != "" || (ch.Type != "" && ch.Type != "webhook")
}

// channelRow is a channel's line of `channel list`.
func channelRow(ch *openapi.Channel) []string {
	if !isMessaging(ch) {
		return []string{ch.ID, ch.Type, yesNo(ch.Enabled), "-", fmtTime(&ch.Status.LastDeliveryAt), "-", strconv.FormatInt(ch.Status.Failures, 10)}
	}
	return []string{ch.ID, ch.Type, yesNo(ch.Enabled), ch.Adapter.State, fmtTime(&ch.Messages.LastMessageAt),
		strconv.FormatInt(ch.Messages.Received, 10), strconv.FormatInt(ch.Messages.Failed, 10)}
}

// ingressURL is the URL a platform must call for a channel that receives
// by callbacks (Telegram webhook mode, Slack Events API mode), "" for the
// others. It is this client's gateway URL: behind a proxy or tunnel the
// public address differs, and that is the one to register.
func (a *App) ingressURL(ch *openapi.Channel) string {
	mode, _ := ch.Settings["mode"].(string)
	if !(ch.Type == "telegram" && mode == "webhook") && !(ch.Type == "slack" && mode == "events") {
		return ""
	}
	path, _ := ch.Settings["ingress_path"].(string)
	if path == "" {
		path = "/ingress/" + ch.ID
	}
	base := strings.TrimRight(a.target.URL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return path + " (on the gateway's public address)"
	}
	return base + path
}

// printMessagingChannel is `status` of a messaging channel.
func (a *App) printMessagingChannel(ch *apiclient.Channel) {
	str := func(k string) string { s, _ := ch.Settings[k].(string); return s }
	state := ch.Adapter.State
	if !ch.Adapter.Since.IsZero() {
		state += " since " + fmtTime(&ch.Adapter.Since)
	}
	lastErr := ch.Adapter.LastError
	if lastErr != "" && !ch.Adapter.LastErrorAt.IsZero() {
		lastErr = fmtTime(&ch.Adapter.LastErrorAt) + " " + lastErr
	}
	if lastErr == "" {
		lastErr = ch.Messages.LastError
	}
	kv := [][2]string{
		{"id", ch.ID}, {"type", ch.Type}, {"enabled", yesNo(ch.Enabled)}, {"agent", str("agent")}, {"mode", str("mode")},
		{"state", state},
	}
	if jid := ch.Adapter.Detail["jid"]; jid != "" {
		kv = append(kv, [2]string{"account", jid})
	}
	if ch.Adapter.Detail["qr"] != "" {
		kv = append(kv, [2]string{"pairing", "a QR code is waiting to be scanned (agentry channel " + ch.ID + " pair shows it)"})
	}
	kv = append(kv, [][2]string{
		{"last error", lastErr},
		{"messages", fmt.Sprintf("%d received, %d answered, %d failed", ch.Messages.Received, ch.Messages.Answered, ch.Messages.Failed)},
		{"ignored", strconv.FormatInt(ch.Adapter.Ignored, 10) + " since start (not answered: edits, stickers, the activation rules)"},
		{"last message", fmtTime(&ch.Messages.LastMessageAt)},
		{"replies", fmt.Sprintf("%d deliveries, %d failed, %d pending", ch.Status.Deliveries, ch.Status.Failures, ch.Status.Pending)},
	}...)
	if u := a.ingressURL(&ch.Channel); u != "" {
		kv = append(kv, [2]string{"ingress url", u})
	} else {
		kv = append(kv, [2]string{"ingress url", "- (" + str("mode") + " mode takes no callbacks)"})
	}
	keyValues(a.Stdout, kv)
	a.printSettings(ch)
}

// channelMessagesCommand is `channel messages ID`.
func (a *App) channelMessagesCommand() *cobra.Command { return a.messagesCommand("messages ID", "") }

// channelMessagesFixed is `channel <adapter> messages`.
func (a *App) channelMessagesFixed(id string) *cobra.Command {
	return a.messagesCommand("messages", id)
}

func (a *App) messagesCommand(use, fixedID string) *cobra.Command {
	var limit int
	args := exactArgs(1, "ID")
	if fixedID != "" {
		args = noArgs
	}
	cmd := &cobra.Command{
		Use:   use + " [--limit N]",
		Short: "List a messaging channel's inbound messages, newest first",
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := fixedID
			if id == "" {
				id = args[0]
			}
			if limit < 1 || limit > 500 {
				return usagef("--limit %d: expected 1 to 500", limit)
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.ChannelMessages(cmd.Context(), id, limit)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			rows := [][]string{}
			for _, m := range l.Messages {
				rows = append(rows, []string{fmtTime(&m.ReceivedAt), m.MessageID, m.ChatID, m.ThreadID, m.UserID, m.Status,
					fmtTime(&m.AnsweredAt), strings.Join(m.ReplyIds, ","), m.RunID, m.Error})
			}
			table(a.Stdout, []string{"RECEIVED", "MESSAGE", "CHAT", "THREAD", "USER", "STATUS", "ANSWERED", "REPLIES", "RUN", "ERROR"}, rows)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "how many messages (1-500)")
	return cmd
}
