package agentry

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/signature"
)

// webhookCommand holds client-side webhook tools. `verify` checks a
// captured outbound request (as a receiver would) without any gateway.
func (a *App) webhookCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "webhook", Short: "Webhook tools: verify a captured signed delivery"}
	var requestFile, secretEnv string
	var tolerance time.Duration
	var at int64
	verify := &cobra.Command{
		Use:   "verify --request FILE --secret-env NAME",
		Short: "Verify the X-Agentry-Signature of a captured HTTP request (raw request text: request line, headers, blank line, body)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret := os.Getenv(secretEnv)
			if secretEnv == "" || secret == "" {
				return usagef("--secret-env must name a set environment variable holding the channel secret")
			}
			raw, err := readInput(requestFile, cmd.InOrStdin())
			if err != nil {
				return err
			}
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(raw)))
			if err != nil {
				return fmt.Errorf("%s is not a raw HTTP request: %w", requestFile, err)
			}
			body, err := io.ReadAll(req.Body)
			if err != nil {
				return fmt.Errorf("read body: %w", err)
			}
			now := time.Now()
			if at > 0 {
				now = time.Unix(at, 0)
			}
			verr := signature.Verify(secret, req.Header, body, now, tolerance)
			result := map[string]any{"valid": verr == nil, "delivery_id": req.Header.Get("X-Agentry-Delivery"), "timestamp": req.Header.Get("X-Agentry-Timestamp")}
			if verr != nil {
				result["error"] = verr.Error()
			}
			if a.jsonOut {
				printValue(cmd.OutOrStdout(), result)
			} else if verr == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "valid signature (delivery %s)\n", result["delivery_id"])
			}
			if verr != nil {
				return fmt.Errorf("signature not valid: %w", verr)
			}
			return nil
		},
	}
	verify.Flags().StringVar(&requestFile, "request", "-", "file with the raw captured request (- for standard input)")
	verify.Flags().StringVar(&secretEnv, "secret-env", "", "environment variable holding the secret (never pass secrets as arguments)")
	verify.Flags().DurationVar(&tolerance, "tolerance", 300*time.Second, "accepted distance of X-Agentry-Timestamp from now")
	verify.Flags().Int64Var(&at, "at", 0, "check as of this unix time instead of now (for old captures and test vectors)")
	cmd.AddCommand(verify)
	return cmd
}

func readInput(path string, stdin io.Reader) ([]byte, error) {
	if path == "" || path == "-" {
		return io.ReadAll(stdin)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return data, nil
}
