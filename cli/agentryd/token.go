package agentryd

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/auth"
)

// newTokenCommand issues JWTs in jwt mode. It runs on the gateway host,
// where the signing secret is; the API has no endpoint that mints tokens
// from nothing.
func newTokenCommand() *cobra.Command {
	var subject, role string
	var perms []string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Issue JWT access and refresh tokens (auth.mode jwt)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, closer, err := loadRuntime(cmd.Context(), cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			defer closer.Close()
			if cfg.Auth.Mode != "jwt" {
				return fmt.Errorf("auth.mode is %q; tokens are only used in jwt mode", cfg.Auth.Mode)
			}
			a, err := auth.FromConfig(cmd.Context(), &cfg.Config, "")
			if err != nil {
				return err
			}
			ja, ok := a.(*auth.JWTAuthenticator)
			if !ok {
				return fmt.Errorf("unexpected authenticator %T", a)
			}
			access, refresh, err := ja.Issue(subject, role, perms, time.Now())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"access_token": access, "refresh_token": refresh, "token_type": "Bearer"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "access_token:  %s\nrefresh_token: %s\n", access, refresh)
			return nil
		},
	}
	cmd.Flags().StringVar(&subject, "subject", "", "subject (user id) of the token")
	cmd.Flags().StringVar(&role, "role", auth.RoleMember, "role: admin, operator, member or viewer")
	cmd.Flags().StringSliceVar(&perms, "permission", nil, "extra permission, e.g. memory:read (repeatable)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.MarkFlagRequired("subject")
	return cmd
}
