package agentry

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// adapter is a per-adapter namespace: `agentry channel <name> ...`.
type adapter struct {
	name  string
	short string
	// messaging adapters take the shared chat flags (--trigger,
	// --allow-groups, --allowed-chats, --allowed-users).
	messaging bool
}

// adapters are the channel types with their own namespace. The outbound
// webhook exists today; the messaging adapters' settings are passed
// through to the gateway, which rejects keys it does not know.
var adapters = []adapter{
	{name: "webhook", short: "Outbound webhook channel (channels.webhook)"},
	{name: "telegram", short: "Telegram bot channel", messaging: true},
	{name: "slack", short: "Slack channel", messaging: true},
	{name: "discord", short: "Discord channel", messaging: true},
}

func (a *App) channelCommand() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List channels with their delivery status",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Channels(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			rows := [][]string{}
			for _, ch := range l.Channels {
				rows = append(rows, []string{ch.ID, ch.Type, yesNo(ch.Enabled), ch.Status.LastStatus, fmtTime(&ch.Status.LastDeliveryAt),
					strconv.FormatInt(ch.Status.Deliveries, 10), strconv.FormatInt(ch.Status.Failures, 10)})
			}
			table(a.Stdout, []string{"ID", "TYPE", "ENABLED", "LAST STATUS", "LAST DELIVERY", "DELIVERIES", "FAILURES"}, rows)
			return nil
		},
	}
	var sets []string
	update := &cobra.Command{
		Use:   "update ID --set key=value...",
		Short: "Change channel settings (values are JSON when they parse as JSON, else text; secrets are write-only)",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(sets) == 0 {
				return usagef("channel update needs at least one --set key=value")
			}
			settings, err := parseSets(sets)
			if err != nil {
				return err
			}
			return a.updateChannel(cmd, args[0], settings)
		},
	}
	update.Flags().StringArrayVar(&sets, "set", nil, "key=value to set (repeatable)")

	cmd := group("channel", "Manage channels (delivery adapters)",
		list, a.channelStatusCommand("status ID", ""), a.channelToggleCommand("enable ID", "", true), a.channelToggleCommand("disable ID", "", false), update)
	for _, ad := range adapters {
		cmd.AddCommand(a.adapterCommand(ad))
	}
	return cmd
}

func parseSets(sets []string) (map[string]any, error) {
	out := map[string]any{}
	for _, s := range sets {
		k, v, err := splitSet(s)
		if err != nil {
			return nil, err
		}
		var parsed any
		if json.Unmarshal([]byte(v), &parsed) == nil {
			out[k] = parsed
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// channelStatusCommand shows a channel; fixedID is set for adapter namespaces.
func (a *App) channelStatusCommand(use, fixedID string) *cobra.Command {
	args := exactArgs(1, "ID")
	if fixedID != "" {
		args = noArgs
	}
	return &cobra.Command{
		Use:   use,
		Short: "Show a channel's settings (secrets redacted) and delivery status",
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := fixedID
			if id == "" {
				id = args[0]
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ch, err := c.Channel(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ch.RawJSON())
			}
			a.printChannel(ch)
			return nil
		},
	}
}

func (a *App) channelToggleCommand(use, fixedID string, on bool) *cobra.Command {
	args := exactArgs(1, "ID")
	if fixedID != "" {
		args = noArgs
	}
	short := "Disable a channel"
	if on {
		short = "Enable a channel"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			id := fixedID
			if id == "" {
				id = args[0]
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ch, err := c.SetChannelEnabled(cmd.Context(), id, on)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ch.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Channel %s %s.\n", ch.ID, map[bool]string{true: "enabled", false: "disabled"}[ch.Enabled])
			return nil
		},
	}
}

func (a *App) updateChannel(cmd *cobra.Command, id string, settings map[string]any) error {
	c, err := a.client(0)
	if err != nil {
		return err
	}
	ch, err := c.UpdateChannel(cmd.Context(), id, settings)
	if err != nil {
		return err
	}
	if a.jsonOut {
		return printJSON(a.Stdout, ch.RawJSON())
	}
	keys := make([]string, 0, len(settings))
	for k := range settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(a.Stdout, "Channel %s updated: %s.\n", ch.ID, strings.Join(keys, ", "))
	return nil
}

func (a *App) printChannel(ch *apiclient.Channel) {
	keyValues(a.Stdout, [][2]string{
		{"id", ch.ID}, {"type", ch.Type}, {"enabled", yesNo(ch.Enabled)},
		{"last delivery", fmtTime(&ch.Status.LastDeliveryAt)}, {"last status", ch.Status.LastStatus}, {"last error", ch.Status.LastError},
		{"deliveries", strconv.FormatInt(ch.Status.Deliveries, 10)}, {"failures", strconv.FormatInt(ch.Status.Failures, 10)},
	})
	if len(ch.Settings) == 0 {
		return
	}
	keys := make([]string, 0, len(ch.Settings))
	for k := range ch.Settings {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(a.Stdout, "settings:")
	rows := [][]string{}
	for _, k := range keys {
		v := ch.Settings[k]
		s, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			s = string(b)
		}
		rows = append(rows, []string{"  " + k, s})
	}
	table(a.Stdout, []string{"  KEY", "VALUE"}, rows)
}

// adapterCommand is `channel <adapter> status|enable|disable|configure`.
func (a *App) adapterCommand(ad adapter) *cobra.Command {
	var sets, headers, allowedChats, allowedUsers []string
	var url, method, trigger, secretFile string
	var secretStdin, allowGroups bool
	configure := &cobra.Command{
		Use:   "configure [flags]",
		Short: "Change the " + ad.name + " channel's settings",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			settings, err := parseSets(sets)
			if err != nil {
				return err
			}
			f := cmd.Flags()
			if ad.name == "webhook" {
				if f.Changed("url") {
					settings["url"] = url
				}
				if f.Changed("method") {
					settings["method"] = strings.ToUpper(method)
				}
				if f.Changed("header") {
					for _, h := range headers {
						if !strings.Contains(h, ":") {
							return usagef("--header %q: expected \"Name: value\"", h)
						}
					}
					settings["headers"] = strings.Join(headers, "\n")
				}
				if secretStdin && secretFile != "" {
					return usagef("use one of --secret-stdin and --secret-file")
				}
				if secretStdin || secretFile != "" {
					v, err := a.readSecretValue(secretFile, "webhook signing secret")
					if err != nil {
						return err
					}
					settings["secret"] = v
				}
			}
			if ad.messaging {
				if f.Changed("trigger") {
					settings["trigger"] = trigger
				}
				if f.Changed("allow-groups") {
					settings["allow_groups"] = allowGroups
				}
				if f.Changed("allowed-chats") {
					settings["allowed_chats"] = allowedChats
				}
				if f.Changed("allowed-users") {
					settings["allowed_users"] = allowedUsers
				}
			}
			if len(settings) == 0 {
				return usagef("channel %s configure: nothing to change (see --help)", ad.name)
			}
			return a.updateChannel(cmd, ad.name, settings)
		},
	}
	f := configure.Flags()
	f.StringArrayVar(&sets, "set", nil, "other key=value to set (repeatable)")
	if ad.name == "webhook" {
		f.StringVar(&url, "url", "", "destination URL")
		f.StringVar(&method, "method", "", "HTTP method (POST)")
		f.StringArrayVar(&headers, "header", nil, "\"Name: value\" header line sent with every request (repeatable; replaces all header lines)")
		f.BoolVar(&secretStdin, "secret-stdin", false, "read the signing secret from standard input")
		f.StringVar(&secretFile, "secret-file", "", "read the signing secret from a file")
	}
	if ad.messaging {
		f.StringVar(&trigger, "trigger", "", "what makes the agent answer in a chat (e.g. mention, all)")
		f.BoolVar(&allowGroups, "allow-groups", false, "answer in group chats")
		f.StringSliceVar(&allowedChats, "allowed-chats", nil, "chat ids the channel answers in (comma-separated or repeated)")
		f.StringSliceVar(&allowedUsers, "allowed-users", nil, "user ids the channel answers (comma-separated or repeated)")
	}
	return group(ad.name, ad.short,
		a.channelStatusCommand("status", ad.name),
		a.channelToggleCommand("enable", ad.name, true),
		a.channelToggleCommand("disable", ad.name, false),
		configure)
}

// readSecretValue reads a secret from a file or standard input (a prompt
// without echo on a terminal). One trailing newline is dropped.
func (a *App) readSecretValue(file, what string) (string, error) {
	var data []byte
	var err error
	switch {
	case file != "":
		data, err = os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", file, err)
		}
	case isTerminal(a.Stdin):
		data, err = readPassword(a.Stdin.(*os.File), a.Stderr, "Value of "+what+": ")
		if err != nil {
			return "", err
		}
	default:
		data, err = io.ReadAll(io.LimitReader(a.Stdin, 1<<20))
		if err != nil {
			return "", fmt.Errorf("read %s from standard input: %w", what, err)
		}
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if v == "" {
		return "", usagef("the %s is empty", what)
	}
	return v, nil
}
