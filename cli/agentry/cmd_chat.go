package agentry

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
)

func (a *App) chatCommand() *cobra.Command {
	var agentID, userID, sessionID string
	cmd := &cobra.Command{
		Use:   "chat --agent ID [--user ID] [TEXT...]",
		Short: "Send a message to an agent and stream the reply as it arrives (TEXT or standard input)",
		Long: `Streams the reply from POST /api/v1/chat/stream to the terminal chunk by chunk.
With --json, prints one JSON object a line: {"type":"delta","text":...} for
each chunk, then {"type":"done",...ids} (or {"type":"error","error":...}).`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if agentID == "" {
				return usagef("chat needs --agent ID")
			}
			text := strings.Join(args, " ")
			if strings.TrimSpace(text) == "" {
				if isTerminal(a.Stdin) {
					return usagef("chat needs a message: agentry chat --agent %s \"hello\" (or pipe it on standard input)", agentID)
				}
				data, err := io.ReadAll(a.Stdin)
				if err != nil {
					return fmt.Errorf("read message from standard input: %w", err)
				}
				text = strings.TrimSpace(string(data))
			}
			if text == "" {
				return usagef("chat: the message is empty")
			}
			c, err := a.client(runTimeout)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(a.Stdout)
			wrote := false
			done, err := c.ChatStream(cmd.Context(), apiclient.ChatRequest{AgentID: agentID, Text: text, UserID: userID, SessionID: sessionID}, func(delta string) error {
				if a.jsonOut {
					return enc.Encode(map[string]string{"type": "delta", "text": delta})
				}
				wrote = wrote || delta != ""
				_, werr := io.WriteString(a.Stdout, delta)
				return werr
			})
			if wrote && !a.jsonOut {
				fmt.Fprintln(a.Stdout)
			}
			if err != nil {
				if se, ok := err.(*apiclient.StreamError); ok && a.jsonOut {
					enc.Encode(map[string]string{"type": "error", "error": se.Message})
				}
				return err
			}
			if a.jsonOut {
				return enc.Encode(map[string]string{"type": "done", "session_id": done.SessionID, "run_id": done.RunID, "response_id": done.ResponseID})
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agentID, "agent", "", "agent id (required)")
	cmd.Flags().StringVar(&userID, "user", "", "stable user id; the same id continues the same conversation (default api-user)")
	cmd.Flags().StringVar(&sessionID, "session", "", "continue this session id")
	return cmd
}
