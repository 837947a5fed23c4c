package agentry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

// pairPollInterval is how often `pair` reads the channel while it waits
// for the phone (a variable for the tests).
var pairPollInterval = time.Second

// pairCommand is `channel <adapter> pair`: start pairing, show each QR
// code the platform issues, and wait until a phone scanned one.
func (a *App) pairCommand(id string) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "pair [--timeout 3m]",
		Short: "Link the channel to a phone: shows the QR code to scan and waits until it is paired",
		Long: `Starts pairing on the gateway (POST /channels/` + id + `/pair, admin) and shows the QR
code in the terminal; scan it with WhatsApp on the phone (Settings > Linked devices >
Link a device). A new code is shown each time WhatsApp rotates it. Ends when the
channel is paired ("Paired as <account>"), when pairing fails (exit 1) or after
--timeout. The channel must be enabled first. Progress goes to standard error;
--json prints the channel as it ended on standard output.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if timeout <= 0 {
				return usagef("--timeout %s: expected a positive duration", timeout)
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			ch, err := c.PairChannel(ctx, id)
			if err != nil {
				return err
			}
			fmt.Fprintf(a.Stderr, "Pairing %s: scan the code with WhatsApp on your phone (Settings > Linked devices > Link a device); waiting up to %s.\n", id, timeout)
			ch, err = a.waitPaired(ctx, c, ch)
			if a.jsonOut && ch != nil && len(ch.RawJSON()) > 0 {
				if perr := printJSON(a.Stdout, ch.RawJSON()); perr != nil && err == nil {
					err = perr
				}
			}
			if err != nil {
				return err
			}
			if !a.jsonOut {
				fmt.Fprintf(a.Stdout, "Paired as %s.\n", orDash(ch.Adapter.Detail["jid"]))
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Minute, "how long to wait for the phone")
	return cmd
}

// waitPaired polls the channel until pairing ends: paired or connected
// (nil error), an error state or unpaired again (pairing failed: the
// gateway's last_error), or ctx's end. It returns the last view read.
func (a *App) waitPaired(ctx context.Context, c *apiclient.Client, ch *apiclient.Channel) (*apiclient.Channel, error) {
	shown := ""
	for {
		switch ch.Adapter.State {
		case "paired", "connected":
			return ch, nil
		case "pairing", "connecting":
		default: // unpaired, error, unauthorized, stopped: pairing ended without a device
			msg := ch.Adapter.LastError
			if msg == "" {
				msg = "the channel is " + ch.Adapter.State
			}
			return ch, fmt.Errorf("pairing %s failed: %s", ch.ID, msg)
		}
		if qr := ch.Adapter.Detail["qr"]; qr != "" && qr != shown {
			art, err := renderQR(qr)
			if err != nil {
				return ch, err
			}
			if shown != "" {
				fmt.Fprintln(a.Stderr, "WhatsApp issued a new code:")
			}
			fmt.Fprint(a.Stderr, art)
			shown = qr
		}
		select {
		case <-ctx.Done():
			return ch, a.pairTimeout(ctx, ch)
		case <-time.After(pairPollInterval):
		}
		next, err := c.Channel(ctx, ch.ID)
		if err != nil {
			if ctx.Err() != nil {
				return ch, a.pairTimeout(ctx, ch)
			}
			return ch, err
		}
		ch = next
	}
}

func (a *App) pairTimeout(ctx context.Context, ch *apiclient.Channel) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("pairing %s: no phone scanned the code in time (state %s); run pair again", ch.ID, ch.Adapter.State)
	}
	return ctx.Err()
}

// unpairCommand is `channel <adapter> unpair`.
func (a *App) unpairCommand(id string) *cobra.Command {
	return &cobra.Command{
		Use:   "unpair",
		Short: "Log the channel's device out and forget it (the phone shows the link removed)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ch, err := c.UnpairChannel(cmd.Context(), id)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, ch.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Channel %s unpaired (state %s).\n", ch.ID, ch.Adapter.State)
			return nil
		},
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
