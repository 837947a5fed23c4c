package agentryd

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/registry"
)

// DefaultRegistryAddr is where `agentryd registry serve` listens.
const DefaultRegistryAddr = "127.0.0.1:18790"

// newRegistryCommand is `agentryd registry keygen|serve` (docs/registry.md).
func newRegistryCommand() *cobra.Command {
	reg := &cobra.Command{Use: "registry", Short: "Run a package registry, make its signing key", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() }}
	reg.AddCommand(newKeygenCommand(), newServeCommand())
	return reg
}

func newKeygenCommand() *cobra.Command {
	var out string
	var force, asJSON bool
	cmd := &cobra.Command{
		Use:   "keygen --out PATH",
		Short: "Make an Ed25519 signing key: the private key goes to PATH (mode 0600), the public key is printed (hex)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageError{errors.New("registry keygen needs --out PATH")}
			}
			if _, err := os.Lstat(out); err == nil && !force {
				return fmt.Errorf("%s exists; refusing to replace a signing key (use --force)", out)
			}
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				return err
			}
			if err := config.WriteFileAtomic(out, []byte(hex.EncodeToString(priv)+"\n"), 0o600); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]string{"private_key_file": out, "public_key": hex.EncodeToString(pub), "key_id": agentpkg.KeyID(pub)})
			}
			fmt.Fprintln(cmd.OutOrStdout(), hex.EncodeToString(pub))
			fmt.Fprintf(cmd.ErrOrStderr(), "Private key written to %s (mode 0600, key id %s). Give consumers the public key above as signing_key.\n", out, agentpkg.KeyID(pub))
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "file for the private key (hex)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing key file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newServeCommand() *cobra.Command {
	var dir, addr, keyFile string
	cmd := &cobra.Command{
		Use:   "serve [--dir packages] [--addr 127.0.0.1:18790] [--signing-key-file KEY]",
		Short: "Serve <slug>-<version>.tar.gz archives and their index; with a key every package is signed",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := os.Stat(dir)
			if err != nil || !st.IsDir() {
				return fmt.Errorf("--dir %s: not a folder of package archives", dir)
			}
			srv := &registry.Server{Dir: dir}
			if keyFile != "" {
				if srv.Key, err = agentpkg.LoadPrivateKeyFile(keyFile); err != nil {
					return err
				}
			}
			ix, err := srv.Index()
			if err != nil {
				return fmt.Errorf("read %s: %w", dir, err)
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("cannot listen on %s: %w", addr, err)
			}
			signed := "unsigned"
			if srv.Key != nil {
				signed = "signing with key " + agentpkg.KeyID(srv.Key.Public().(ed25519.PublicKey))
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Registry serving %d package(s) from %s on http://%s (%s; Ctrl-C to stop)\n", len(ix.Packages), dir, ln.Addr(), signed)
			return serveUntilDone(cmd.Context(), ln, srv)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "packages", "folder holding <slug>-<version>.tar.gz archives")
	cmd.Flags().StringVar(&addr, "addr", DefaultRegistryAddr, "listen address")
	cmd.Flags().StringVar(&keyFile, "signing-key-file", "", "hex Ed25519 private key; when set every package is signed")
	return cmd
}

func serveUntilDone(ctx context.Context, ln net.Listener, h http.Handler) error {
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return hs.Shutdown(sctx)
	case err := <-errc:
		return err
	}
}
