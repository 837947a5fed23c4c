package agentry

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes of the client.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// usageError is a mistake in how the command was called: exit 2 with the
// command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// showsUsage: unknown commands and flags print the command's usage; other
// usage errors (a bad value, an unknown context) print their message and a
// pointer to --help, because the message says all there is.
func showsUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag: ", "unknown shorthand flag: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// exitError ends the command with a code; an empty message prints nothing
// more (the command already reported, e.g. a failing eval or doctor).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// silentFailure is exit 1 after the command printed its own report.
func silentFailure() error { return &exitError{code: ExitFailure} }

// isUsage classifies errors: ours, and Cobra's own argument and flag
// errors, which it returns as plain errors.
func isUsage(err error) bool {
	var ue *usageError
	if errors.As(err, &ue) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command ", "unknown flag: ", "unknown shorthand flag: ", "required flag(s) ",
		"flag needs an argument", "invalid argument ", "accepts ", "requires at least ", "requires at most ", "if any flags in the group"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// exactArgs and friends return usage errors (Cobra's return plain ones).
func exactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			what := fmt.Sprintf("%d argument(s)", n)
			if len(names) > 0 {
				what = strings.Join(names, " ")
			}
			return usagef("%s takes %s, got %d", cmd.CommandPath(), what, len(args))
		}
		return nil
	}
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s takes no arguments, got %q", cmd.CommandPath(), strings.Join(args, " "))
	}
	return nil
}

// group makes a command that only holds subcommands: without one it
// prints help; an unknown one is a usage error.
func group(use, short string, children ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	c.AddCommand(children...)
	return c
}
