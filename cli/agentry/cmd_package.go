package agentry

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/apiclient/openapi"
	"github.com/agentryhq/agentry/internal/config"
)

// agentPackageCommand is `agent package export|inspect|import`
// (docs/packages.md). Everything goes through the API, so the target may
// be a remote gateway; only --out writes a file here, and that is the
// file the user asked for.
func (a *App) agentPackageCommand() *cobra.Command {
	var out, keyFile string
	export := &cobra.Command{
		Use:   "export ID [--out FILE] [--signing-key-file KEY]",
		Short: "Write an agent as a package (.agentry-agent.json), optionally signed",
		Args:  exactArgs(1, "ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var key ed25519.PrivateKey
			if keyFile != "" {
				var err error
				if key, err = agentpkg.LoadPrivateKeyFile(keyFile); err != nil {
					return err
				}
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			ex, err := c.ExportAgentPackage(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			doc := []byte(ex.Package)
			p, err := agentpkg.Verify(doc, agentpkg.VerifyOptions{})
			if err != nil {
				return fmt.Errorf("the gateway sent a package that does not verify: %w", err)
			}
			if key != nil {
				if doc, err = agentpkg.Sign(doc, key); err != nil {
					return err
				}
			} else if doc, err = p.Marshal(); err != nil {
				return err
			}
			if out == "" {
				out = args[0] + agentpkg.Extension
			}
			for _, s := range ex.Skipped {
				fmt.Fprintln(a.Stderr, "left out:", s)
			}
			if out == "-" {
				_, err := a.Stdout.Write(doc)
				return err
			}
			if err := config.WriteFileAtomic(out, doc, 0o644); err != nil {
				return fmt.Errorf("write %s: %w", out, err)
			}
			signed, _ := agentpkg.Verify(doc, agentpkg.VerifyOptions{})
			if a.jsonOut {
				res := map[string]any{"file": out, "agent_id": args[0], "checksum": signed.Checksum, "signed": signed.Signature != nil,
					"files": len(signed.Files), "skipped": nonNil(ex.Skipped)}
				if signed.Signature != nil {
					res["key_id"] = signed.Signature.KeyID
				}
				return printValue(a.Stdout, res)
			}
			how := "unsigned"
			if signed.Signature != nil {
				how = "signed by key " + signed.Signature.KeyID
			}
			fmt.Fprintf(a.Stdout, "Wrote %s (agent %s, %d bundled file(s), %s).\n", out, args[0], len(signed.Files), how)
			return nil
		},
	}
	export.Flags().StringVarP(&out, "out", "o", "", "package file to write (default <id>"+agentpkg.Extension+"; - for stdout)")
	export.Flags().StringVar(&keyFile, "signing-key-file", "", "hex Ed25519 private key (agentryd registry keygen) to sign with")

	var trusted []string
	inspect := &cobra.Command{
		Use:   "inspect FILE",
		Short: "Verify a package and list what the target gateway is missing (exit 1 on any integrity failure)",
		Args:  exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, p, err := a.readPackage(args[0], trusted)
			if err != nil {
				return err
			}
			var rep *apiclient.PackageReport
			var gwErr error
			if c, err := a.client(0); err != nil {
				gwErr = err
			} else {
				rep, gwErr = c.InspectAgentPackage(cmd.Context(), doc)
			}
			if a.jsonOut {
				res := map[string]any{"file": args[0], "verified": true, "agent_id": p.AgentID(), "checksum": p.Checksum,
					"signed": p.Signature != nil, "requirements": p.Requirements}
				if p.Signature != nil {
					res["key_id"] = p.Signature.KeyID
				}
				if rep != nil {
					res["missing"], res["exists"] = rawField(rep.RawJSON(), "missing"), rep.Exists
				} else {
					res["gateway_error"] = gwErr.Error()
				}
				return printValue(a.Stdout, res)
			}
			a.printPackage(args[0], p)
			if rep == nil {
				fmt.Fprintf(a.Stderr, "Could not ask the gateway what is missing: %v\n", gwErr)
				return nil
			}
			a.printMissing(&rep.PackageReport)
			return nil
		},
	}
	inspect.Flags().StringArrayVar(&trusted, "trusted-key", nil, "hex Ed25519 public key that must have signed the package (repeatable)")

	var enable, overwrite bool
	imp := &cobra.Command{
		Use:   "import FILE [--enable] [--overwrite]",
		Short: "Verify a package and install its agent on the gateway (disabled unless --enable)",
		Args:  exactArgs(1, "FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			doc, _, err := a.readPackage(args[0], trusted)
			if err != nil {
				return err
			}
			c, err := a.client(0)
			if err != nil {
				return err
			}
			res, err := c.ImportAgentPackage(cmd.Context(), doc, enable, overwrite)
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, res.RawJSON())
			}
			state := "disabled (enable it with `agentry agent enable " + res.Agent.ID + "`)"
			if enable {
				state = "enabled"
			}
			fmt.Fprintf(a.Stdout, "Imported agent %s, %s.\n", res.Agent.ID, state)
			a.printMissing(&res.Report)
			return nil
		},
	}
	imp.Flags().BoolVar(&enable, "enable", false, "enable the agent (default: imported disabled)")
	imp.Flags().BoolVar(&overwrite, "overwrite", false, "replace an existing agent with the same id")
	imp.Flags().StringArrayVar(&trusted, "trusted-key", nil, "hex Ed25519 public key that must have signed the package (repeatable)")

	return group("package", "Export, inspect and import agent packages (.agentry-agent.json)", export, inspect, imp)
}

// readPackage reads and verifies a package file on the client. Failures
// end the command with exit 1 and the cause; nothing is sent.
func (a *App) readPackage(file string, trusted []string) ([]byte, *agentpkg.Package, error) {
	var opts agentpkg.VerifyOptions
	for _, t := range trusted {
		k, err := agentpkg.ParsePublicKey(t)
		if err != nil {
			return nil, nil, usagef("--trusted-key %q: %v", t, err)
		}
		opts.TrustedKeys = append(opts.TrustedKeys, k)
	}
	st, err := os.Stat(file)
	if err != nil {
		return nil, nil, err
	}
	if st.Size() > agentpkg.MaxPackageBytes {
		return nil, nil, fmt.Errorf("%s: %d bytes is over the package limit of %d", file, st.Size(), agentpkg.MaxPackageBytes)
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	p, err := agentpkg.Verify(doc, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("%s failed verification (%s): %w; nothing was sent", file, agentpkg.KindOf(err), err)
	}
	return doc, p, nil
}

func (a *App) printPackage(file string, p *agentpkg.Package) {
	sig := "unsigned"
	if p.Signature != nil {
		sig = "signed by key " + p.Signature.KeyID + " (signature verifies)"
	}
	keyValues(a.Stdout, [][2]string{{"file", file}, {"agent", p.AgentID()}, {"integrity", "ok (" + p.Checksum + ")"},
		{"signature", sig}, {"redacted", strings.Join(p.Redacted, ", ")}})
	if len(p.Files) > 0 {
		fmt.Fprintln(a.Stdout, "bundled files:")
		for _, f := range p.Files {
			fmt.Fprintf(a.Stdout, "  %s (%d bytes)\n", f.Path, f.Size)
		}
	}
}

// rawField is one field of a JSON object as the gateway sent it (null when
// absent), so --json output passes it on unchanged.
func rawField(doc []byte, key string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(doc, &obj) != nil || obj[key] == nil {
		return json.RawMessage("null")
	}
	return obj[key]
}

func (a *App) printMissing(rep *openapi.PackageReport) {
	m := rep.Missing
	lists := [][2]any{{"providers", m.Providers}, {"channels", m.Channels}, {"peer agents", m.PeerAgents},
		{"skills", m.Skills}, {"MCP servers", m.MCPServers}, {"files", m.Files},
		{"knowledge bases", m.KnowledgeBases}, {"secrets", m.Secrets}}
	n := 0
	for _, l := range lists {
		n += len(l[1].([]string))
	}
	if rep.Exists {
		fmt.Fprintf(a.Stdout, "The gateway already has an agent %s (import needs --overwrite).\n", rep.AgentID)
	}
	if n == 0 {
		fmt.Fprintln(a.Stdout, "The gateway has everything the agent needs.")
		return
	}
	fmt.Fprintln(a.Stdout, "Missing on the gateway (set these up before enabling the agent):")
	for _, l := range lists {
		if v := l[1].([]string); len(v) > 0 {
			fmt.Fprintf(a.Stdout, "  %s: %s\n", l[0], strings.Join(v, ", "))
		}
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
