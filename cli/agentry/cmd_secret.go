package agentry

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func (a *App) secretCommand() *cobra.Command {
	var file string
	set := &cobra.Command{
		Use:   "set NAME [--file PATH]",
		Short: "Store a secret (value from standard input or --file; write-only, never shown again)",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := a.readSecretValue(file, "secret "+args[0])
			if err != nil {
				return err
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			if err := c.SetSecret(cmd.Context(), args[0], value); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"name": args[0], "set": true})
			}
			fmt.Fprintf(a.Stdout, "Secret %s stored.\n", args[0])
			return nil
		},
	}
	set.Flags().StringVarP(&file, "file", "f", "", "read the value from this file (one trailing newline is dropped)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List secret names (values are never returned)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Secrets(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Secrets) == 0 {
				fmt.Fprintln(a.Stdout, "No secrets.")
				return nil
			}
			rows := [][]string{}
			for _, s := range l.Secrets {
				t := s.UpdatedAt
				rows = append(rows, []string{s.Name, fmtTime(&t)})
			}
			table(a.Stdout, []string{"NAME", "UPDATED"}, rows)
			return nil
		},
	}
	del := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a secret",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			if err := c.DeleteSecret(cmd.Context(), args[0]); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"name": args[0], "deleted": true})
			}
			fmt.Fprintf(a.Stdout, "Secret %s deleted.\n", args[0])
			return nil
		},
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Re-wrap the data keys with the credentials provider's current key version (rotate the key in the provider first)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			r, err := c.RotateSecrets(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, r.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Provider %s: %d data key(s) re-wrapped, %d secret(s) moved off the key file", r.Provider, r.Rewrapped, r.Resealed)
			if r.Skipped > 0 {
				fmt.Fprintf(a.Stdout, ", %d data key(s) of another provider left as they are", r.Skipped)
			}
			fmt.Fprintln(a.Stdout, ".")
			return nil
		},
	}
	return group("secret", "Manage write-only secrets (admin)", set, list, del, rotate)
}

// readPassword prompts on w and reads a line from the terminal without echo.
func readPassword(f *os.File, w io.Writer, prompt string) ([]byte, error) {
	fmt.Fprint(w, prompt)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(w)
	if err != nil {
		return nil, fmt.Errorf("read from terminal: %w", err)
	}
	return b, nil
}
