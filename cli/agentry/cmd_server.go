package agentry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/spf13/cobra"
)

func (a *App) serverCommand() *cobra.Command {
	status := &cobra.Command{
		Use:   "status",
		Short: "Show the gateway's health (GET /health); exit 1 unless it is ok",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(10 * time.Second)
			if err != nil {
				return err
			}
			h, err := c.Health(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				if err := printJSON(a.Stdout, h.RawJSON()); err != nil {
					return err
				}
			} else {
				keyValues(a.Stdout, [][2]string{{"gateway", a.target.Describe()}, {"status", string(h.Status)}, {"version", h.Version}})
				names := make([]string, 0, len(h.Checks))
				for n := range h.Checks {
					names = append(names, n)
				}
				sort.Strings(names)
				rows := [][]string{}
				for _, n := range names {
					rows = append(rows, []string{n, string(h.Checks[n].Status), h.Checks[n].Error})
				}
				if len(rows) > 0 {
					fmt.Fprintln(a.Stdout)
					table(a.Stdout, []string{"CHECK", "STATUS", "ERROR"}, rows)
				}
			}
			if h.Status != "ok" {
				return &exitError{code: ExitFailure, msg: "the gateway is " + string(h.Status)}
			}
			return nil
		},
	}
	start := &cobra.Command{
		Use:   "start",
		Short: "Run the gateway (agentryd) in the foreground on this machine",
		Args:  noArgs,
		Annotations: map[string]string{
			AnnotationHostChanging: "true",
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			bin, err := findDaemon()
			if err != nil {
				return err
			}
			p := exec.CommandContext(cmd.Context(), bin)
			p.Stdin, p.Stdout, p.Stderr = a.Stdin, a.Stdout, a.Stderr
			p.Cancel = func() error { return p.Process.Signal(os.Interrupt) }
			p.WaitDelay = 30 * time.Second
			if err := p.Run(); err != nil && cmd.Context().Err() == nil {
				return fmt.Errorf("%s: %w", bin, err)
			}
			return nil
		},
	}
	return group("server", "Gateway status and the local gateway process", status, start)
}

// findDaemon looks for agentryd beside this binary, then in PATH.
func findDaemon() (string, error) {
	if self, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(self), "agentryd")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath("agentryd"); err == nil {
		return p, nil
	}
	return "", errors.New("agentryd (the gateway binary) is neither beside agentry nor in PATH")
}

func (a *App) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the client's version and the gateway's, when it answers",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			gwVersion, gwErr := "", error(nil)
			if c, err := a.client(3 * time.Second); err == nil {
				ctx, cancel := context.WithTimeout(cmd.Context(), 3*time.Second)
				h, err := c.Health(ctx)
				cancel()
				if err == nil {
					gwVersion = h.Version
				} else {
					gwErr = err
				}
			} else {
				gwErr = err
			}
			if a.jsonOut {
				out := map[string]any{"client": a.Version, "gateway": nil, "gateway_url": a.target.URL}
				if gwVersion != "" {
					out["gateway"] = gwVersion
				}
				return printValue(a.Stdout, out)
			}
			fmt.Fprintf(a.Stdout, "agentry %s\n", a.Version)
			if gwErr == nil {
				fmt.Fprintf(a.Stdout, "gateway %s at %s\n", gwVersion, a.target.URL)
			} else {
				fmt.Fprintf(a.Stdout, "gateway: unknown (%v)\n", gwErr)
			}
			return nil
		},
	}
}

// exampleAgents are what seed-examples writes.
var exampleAgents = map[string]string{
	"hello.yaml": `# A minimal agent: chat with it with  agentry chat --agent hello "hi"
id: hello
description: Friendly assistant that answers briefly
system_prompt: |
  You are a helpful assistant. Answer briefly and clearly.
`,
	"notes-writer.yaml": `# An agent that writes files into its session folder (builtins).
id: notes-writer
description: Writes notes and reports as files
system_prompt: |
  When asked for a note or report, write it as a Markdown file with write_file
  and reply with a one-line summary.
builtins: [write_file, read_file]
`,
}

func (a *App) seedExamplesCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "seed-examples",
		Short: "Write example agent definitions into the local workspace (existing files are kept)",
		Args:  noArgs,
		Annotations: map[string]string{
			AnnotationHostChanging: "true",
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := a.localConfig()
			if err != nil {
				return err
			}
			dir := cfg.Workspace.AgentsDir()
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return fmt.Errorf("create %s: %w", dir, err)
			}
			names := make([]string, 0, len(exampleAgents))
			for n := range exampleAgents {
				names = append(names, n)
			}
			sort.Strings(names)
			written, kept := []string{}, []string{}
			for _, n := range names {
				path := filepath.Join(dir, n)
				f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
				if errors.Is(err, os.ErrExist) {
					kept = append(kept, path)
					continue
				}
				if err != nil {
					return fmt.Errorf("write %s: %w", path, err)
				}
				_, werr := f.WriteString(exampleAgents[n])
				if cerr := f.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return fmt.Errorf("write %s: %w", path, werr)
				}
				written = append(written, path)
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"written": written, "kept": kept})
			}
			for _, p := range written {
				fmt.Fprintf(a.Stdout, "wrote %s\n", p)
			}
			for _, p := range kept {
				fmt.Fprintf(a.Stdout, "kept  %s (exists)\n", p)
			}
			return nil
		},
	}
}
