package agentry

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/apiclient/openapi"
)

// skillInstallTimeout bounds each install request: the gateway fetches the
// source, scans it and runs every tool once before it answers.
const skillInstallTimeout = 5 * time.Minute

func (a *App) skillCommand() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List the loaded skills",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			l, err := c.Skills(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, l.RawJSON())
			}
			if len(l.Skills) == 0 {
				fmt.Fprintf(a.Stdout, "No skills (folders scanned: %s).\n", strings.Join(l.Dirs, ", "))
				return nil
			}
			rows := [][]string{}
			for _, s := range l.Skills {
				rows = append(rows, []string{s.Name, s.Version, fmt.Sprint(len(s.Tools)), s.Dir, s.Description})
			}
			table(a.Stdout, []string{"NAME", "VERSION", "TOOLS", "DIR", "DESCRIPTION"}, rows)
			return nil
		},
	}
	get := &cobra.Command{
		Use:   "get NAME",
		Short: "Show a skill: manifest, tools and instructions",
		Args:  exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			s, err := c.Skill(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, s.RawJSON())
			}
			keyValues(a.Stdout, [][2]string{{"name", s.Name}, {"version", s.Version}, {"description", s.Description}, {"dir", s.Dir}, {"digest", s.Digest}})
			for _, t := range s.Tools {
				fmt.Fprintf(a.Stdout, "tool skill__%s__%s (%s): %s\n", s.Name, t.Name, t.Script, t.Description)
			}
			if s.Instructions != "" {
				fmt.Fprintf(a.Stdout, "instructions:\n%s\n", indent(s.Instructions, "  "))
			}
			return nil
		},
	}
	rescan := &cobra.Command{
		Use:   "rescan",
		Short: "Hot-load the skill folders; prints what was added, changed, removed and refused (admin)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(0)
			if err != nil {
				return err
			}
			r, err := c.RescanSkills(cmd.Context())
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, r.RawJSON())
			}
			a.printRescan(&r.SkillRescan)
			return nil
		},
	}
	return group("skill", "Manage skills", list, get, a.skillInstallCommand(), rescan)
}

func (a *App) printRescan(r *openapi.SkillRescan) {
	fmt.Fprintf(a.Stdout, "%d skills loaded; added: %s; changed: %s; removed: %s\n", r.Skills,
		orNone(r.Added), orNone(r.Changed), orNone(r.Removed))
	for _, f := range r.Refused {
		fmt.Fprintf(a.Stdout, "refused %s: %s\n", f.Dir, f.Reason)
	}
}

func orNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

func (a *App) skillInstallCommand() *cobra.Command {
	var yes, dryRun bool
	cmd := &cobra.Command{
		Use:   "install SOURCE [--yes] [--dry-run]",
		Short: "Review and install a skill from a folder, a git URL or owner/repo[/folder] (admin)",
		Long: "The gateway fetches the skill, checks it (no path escapes or symlinks out), scans its scripts\n" +
			"(programs run, network, files outside the skill) and runs each tool once in a sandbox; then you\n" +
			"consent to exactly what was reviewed. --yes skips the routine prompt; a danger verdict always\n" +
			"needs an interactive yes. A local folder is refused for a remote gateway.",
		Args: exactArgs(1, "SOURCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, err := a.skillSource(args[0])
			if err != nil {
				return err
			}
			c, err := a.client(skillInstallTimeout)
			if err != nil {
				return err
			}
			a.progressf("Reviewing %s on %s: fetch, static scan, sandboxed dry run ...\n", src, a.target.URL)
			plan, err := c.InstallSkill(cmd.Context(), apiclient.SkillInstallRequest{Source: src})
			if err != nil {
				return err
			}
			if dryRun {
				if a.jsonOut {
					return printJSON(a.Stdout, plan.RawJSON())
				}
				a.printSkillPlan(a.Stdout, plan)
				return nil
			}
			// The review goes where the prompt is: stderr in --json mode.
			out := a.Stdout
			if a.jsonOut {
				out = a.Stderr
			}
			a.printSkillPlan(out, plan)
			danger := plan.Verdict == "danger"
			ok, err := a.skillConsent(plan, yes)
			if err != nil {
				return err
			}
			if !ok {
				return &exitError{code: ExitFailure, msg: fmt.Sprintf("skill %s not installed", plan.Name)}
			}
			a.progressf("Installing %s (%s) ...\n", plan.Name, plan.Digest)
			done, err := c.InstallSkill(cmd.Context(), apiclient.SkillInstallRequest{Source: src, Digest: plan.Digest, AcceptDanger: danger})
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printJSON(a.Stdout, done.RawJSON())
			}
			fmt.Fprintf(a.Stdout, "Skill %s installed in %s.\n", done.Name, done.Dir)
			if done.Rescan != nil {
				a.printRescan(done.Rescan)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "skip the routine consent prompt (never covers a danger verdict)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "review only: fetch, scan and dry-run, install nothing")
	return cmd
}

// progressf writes a progress line to stderr unless --json asks for quiet.
func (a *App) progressf(format string, args ...any) {
	if !a.jsonOut {
		fmt.Fprintf(a.Stderr, format, args...)
	}
}

// skillSource turns a local folder into an absolute path (refused for a
// remote gateway); URLs and slugs pass unchanged.
func (a *App) skillSource(raw string) (string, error) {
	local := strings.HasPrefix(raw, "/") || strings.HasPrefix(raw, ".") || strings.HasPrefix(raw, "~")
	if !local && !strings.Contains(raw, "://") {
		if fi, err := os.Stat(raw); err == nil && fi.IsDir() {
			local = true
		}
	}
	if !local {
		return raw, nil
	}
	if !IsLocal(a.target.URL) {
		return "", &exitError{code: ExitFailure, msg: fmt.Sprintf("a local skill folder is refused for the remote gateway %s: publish it in a git repository and install from its URL", a.target.URL)}
	}
	if rest, ok := strings.CutPrefix(raw, "~"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", err
		}
		raw = filepath.Join(home, rest)
	}
	abs, err := filepath.Abs(raw)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", usagef("%s is not a folder", raw)
	}
	return abs, nil
}

// skillConsent asks for consent. A danger verdict needs the word "yes"
// typed in a terminal, whatever --yes says; otherwise --yes or a y/N prompt.
func (a *App) skillConsent(plan *apiclient.SkillPlan, yes bool) (bool, error) {
	if plan.Verdict == "danger" {
		if !isTerminal(a.Stdin) {
			return false, &exitError{code: ExitFailure, msg: fmt.Sprintf("skill %s has a danger verdict: installing it needs an interactive yes in a terminal (--yes does not cover it)", plan.Name)}
		}
		fmt.Fprintf(a.Stderr, "DANGER: skill %s does things a skill never needs (see above). Type yes to install it anyway: ", plan.Name)
		line, _ := bufio.NewReader(a.Stdin).ReadString('\n')
		return strings.TrimSpace(line) == "yes", nil
	}
	if yes {
		return true, nil
	}
	return a.confirm(fmt.Sprintf("Install skill %s (verdict %s)?", plan.Name, plan.Verdict))
}

// printSkillPlan writes the review a person consents to.
func (a *App) printSkillPlan(w io.Writer, p *apiclient.SkillPlan) {
	verdict := p.Verdict
	if verdict == "danger" {
		verdict = "DANGER"
	}
	tools := make([]string, 0, len(p.Tools))
	for _, t := range p.Tools {
		tools = append(tools, "skill__"+p.Name+"__"+t.Name+" ("+t.Script+")")
	}
	pairs := [][2]string{{"skill", p.Name}, {"version", p.Version}, {"description", p.Description}, {"source", p.Source + " (" + string(p.SourceKind) + ")"},
		{"digest", p.Digest}, {"verdict", string(verdict)}, {"tools", strings.Join(tools, ", ")},
		{"scripts run", strings.Join(p.Scan.Runs, ", ")}, {"network", strings.Join(p.Scan.Network, ", ")},
		{"files outside", strings.Join(p.Scan.Files, ", ")}}
	if p.Replaces != "" {
		pairs = append(pairs, [2]string{"replaces", p.Replaces})
	}
	keyValues(w, pairs)
	for _, f := range p.Scan.Findings {
		if f.Kind == "danger" {
			fmt.Fprintf(w, "  danger %s:%d %s\n", f.File, f.Line, f.Detail)
		}
	}
	for _, d := range p.DryRun {
		switch {
		case d.Skipped != "":
			fmt.Fprintf(w, "dry run %s: %s\n", d.Tool, d.Skipped)
		default:
			where := "network isolated"
			if !d.NetworkIsolated {
				where = "network NOT isolated"
			}
			status := fmt.Sprintf("exit %d", d.ExitCode)
			if d.TimedOut {
				status = "timed out"
			} else if d.Error != "" {
				status = d.Error
			}
			first, _, _ := strings.Cut(strings.TrimSpace(d.Stdout+"\n"+d.Stderr), "\n")
			fmt.Fprintf(w, "dry run %s: %s in %d ms (%s): %s\n", d.Tool, status, d.DurationMs, where, cell(first, true))
		}
	}
}
