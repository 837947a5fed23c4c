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
				rows = append(rows, channelRow(&ch))
			}
			table(a.Stdout, []string{"ID", "TYPE", "ENABLED", "STATE", "LAST MESSAGE/DELIVERY", "RECEIVED", "FAILURES"}, rows)
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

	cmd := group("channel", "Manage channels: the outbound webhook and the messaging adapters",
		list, a.channelStatusCommand("status ID", ""), a.channelToggleCommand("enable ID", "", true), a.channelToggleCommand("disable ID", "", false), update,
		a.channelMessagesCommand())
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
		Short: "Show a channel's state, settings (secrets redacted), messages and deliveries",
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
			if isMessaging(&ch.Channel) {
				a.printMessagingChannel(ch)
			} else {
				a.printChannel(ch)
			}
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
	a.printSettings(ch)
}

func (a *App) printSettings(ch *apiclient.Channel) {
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
		rows = append(rows, []string{"  " + k, settingText(ch.Settings[k])})
	}
	table(a.Stdout, []string{"  KEY", "VALUE"}, rows)
}

// settingText is a setting as a table cell: strings as they are, the rest
// as JSON (lists, booleans).
func settingText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
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
