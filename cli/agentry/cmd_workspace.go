package agentry

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/apiclient"
	"github.com/agentryhq/agentry/internal/config"
)

func (a *App) workspaceCommand() *cobra.Command {
	info := &cobra.Command{
		Use:   "info",
		Short: "Show the workspace: folders, config file, key file, gateway state",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return a.workspaceInfo(cmd.Context()) },
	}
	var dryRun, yes bool
	migrate := &cobra.Command{
		Use:   "migrate [--dry-run] [-y]",
		Short: "Move a legacy flat install (~/agentry) into the workspace layout (the gateway must be stopped)",
		Args:  noArgs,
		Annotations: map[string]string{
			AnnotationHostChanging: "unless-dry-run",
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return a.workspaceMigrate(cmd.Context(), dryRun, yes) },
	}
	migrate.Flags().BoolVar(&dryRun, "dry-run", false, "print the plan and change nothing")
	migrate.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return group("workspace", "Inspect and migrate the local workspace", info, migrate)
}

type workspaceDir struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Exists bool   `json:"exists"`
	Files  int    `json:"files"`
}

func (a *App) workspaceInfo(ctx context.Context) error {
	if a.targetErr == nil && !a.target.Local {
		// A remote target's workspace is on its host; never describe local
		// files as if they were the target's.
		return a.remoteWorkspaceInfo(ctx)
	}
	cfg, err := a.localConfig()
	if err != nil {
		return err
	}
	ws := cfg.Workspace
	dirs := []workspaceDir{}
	for _, d := range [][2]string{{"agents", ws.AgentsDir()}, {"data", ws.DataDir()}, {"skills", ws.SkillsDir()}, {"plugins", ws.PluginsDir()},
		{"artifacts", ws.ArtifactsDir()}, {"sessions", ws.SessionsDir()}, {"mcp-servers", ws.MCPServersDir()}, {"credentials", ws.CredentialsDir()}, {"logs", ws.LogsDir()}} {
		wd := workspaceDir{Name: d[0], Path: d[1]}
		if entries, err := os.ReadDir(d[1]); err == nil {
			wd.Exists, wd.Files = true, len(entries)
		}
		dirs = append(dirs, wd)
	}
	_, keyErr := os.Stat(ws.APIKeyFile())
	legacy := ""
	if ws.LegacyDir != "" && ws.LegacyDir != ws.Root {
		if st, err := os.Stat(ws.LegacyDir); err == nil && st.IsDir() {
			legacy = ws.LegacyDir
		}
	}
	running := a.localGatewayRunning(ctx)
	if a.jsonOut {
		return printValue(a.Stdout, map[string]any{
			"root": ws.Root, "config_file": cfg.Path, "folders": dirs, "api_key_file": ws.APIKeyFile(), "api_key_file_exists": keyErr == nil,
			"legacy_dir": legacy, "gateway_url": a.target.URL, "gateway_running": running,
		})
	}
	cfgFile := cfg.Path
	if cfgFile == "" {
		cfgFile = "none (built-in defaults); `agentry setup` writes " + ws.ConfigFile()
	}
	keyFile := ws.APIKeyFile()
	if keyErr != nil {
		keyFile += " (not created yet; the gateway creates it on first start)"
	}
	gw := a.target.URL + " (not running)"
	if running {
		gw = a.target.URL + " (running)"
	}
	pairs := [][2]string{{"workspace", ws.Root}, {"config file", cfgFile}, {"api key file", keyFile}, {"gateway", gw}}
	if legacy != "" {
		pairs = append(pairs, [2]string{"legacy install", legacy + " (move it with `agentry workspace migrate`)"})
	}
	keyValues(a.Stdout, pairs)
	rows := [][]string{}
	for _, d := range dirs {
		n := "missing"
		if d.Exists {
			n = fmt.Sprintf("%d", d.Files)
		}
		rows = append(rows, []string{d.Name, d.Path, n})
	}
	fmt.Fprintln(a.Stdout)
	table(a.Stdout, []string{"FOLDER", "PATH", "ENTRIES"}, rows)
	return nil
}

func (a *App) remoteWorkspaceInfo(ctx context.Context) error {
	c, err := a.client(0)
	if err != nil {
		return err
	}
	h, err := c.Health(ctx)
	if err != nil {
		return err
	}
	doc, cerr := c.Config(ctx)
	path := "(not available: " + errText(cerr) + ")"
	if cerr == nil {
		path = doc.Path
		if path == "" {
			path = "none (built-in defaults)"
		}
	}
	if a.jsonOut {
		return printValue(a.Stdout, map[string]any{"gateway_url": a.target.URL, "remote": true, "status": h.Status, "version": h.Version, "config_file": path})
	}
	keyValues(a.Stdout, [][2]string{{"gateway", a.target.Describe() + ", remote"}, {"status", string(h.Status)}, {"version", h.Version}, {"config file (on the gateway host)", path}})
	return nil
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// localGatewayRunning asks the local target's /health.
func (a *App) localGatewayRunning(ctx context.Context) bool {
	if a.targetErr != nil || !a.target.Local {
		return false
	}
	c, err := apiclient.New(a.target.URL, "", apiclient.Options{Timeout: 2 * time.Second})
	if err != nil {
		return false
	}
	_, err = c.Health(ctx)
	return err == nil
}

// migrationMove is one entry moved from the legacy folder.
type migrationMove struct {
	From string `json:"from"`
	To   string `json:"to"`
	Kind string `json:"kind"`
}

type migrationPlan struct {
	From      string          `json:"from"`
	To        string          `json:"to"`
	DryRun    bool            `json:"dry_run"`
	Moves     []migrationMove `json:"moves"`
	Left      []string        `json:"left_in_place"`
	Conflicts []string        `json:"conflicts"`
	Warnings  []string        `json:"warnings"`
	Done      bool            `json:"done"`
}

// legacySubdirs are folders of the flat layout that map one to one.
var legacySubdirs = []string{"agents", "data", "skills", "plugins", "artifacts", "sessions", "mcp-servers", "credentials", "logs"}

// planMigration maps the legacy flat layout (config.yaml, agent files and
// the database side by side, maybe some folders) onto the workspace layout.
func planMigration(ws config.Workspace) (*migrationPlan, error) {
	p := &migrationPlan{From: ws.LegacyDir, To: ws.Root, Moves: []migrationMove{}, Left: []string{}, Conflicts: []string{}, Warnings: []string{}}
	entries, err := os.ReadDir(ws.LegacyDir)
	if err != nil {
		return nil, fmt.Errorf("read legacy folder %s: %w", ws.LegacyDir, err)
	}
	add := func(from, to, kind string) {
		p.Moves = append(p.Moves, migrationMove{From: from, To: to, Kind: kind})
		if _, err := os.Lstat(to); err == nil {
			p.Conflicts = append(p.Conflicts, to)
		}
	}
	for _, e := range entries {
		name := e.Name()
		src := filepath.Join(ws.LegacyDir, name)
		ext := strings.ToLower(filepath.Ext(name))
		switch {
		case e.IsDir() && contains(legacySubdirs, name):
			sub, err := os.ReadDir(src)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", src, err)
			}
			for _, s := range sub {
				add(filepath.Join(src, s.Name()), filepath.Join(ws.Root, name, s.Name()), name)
			}
		case e.IsDir():
			p.Left = append(p.Left, src)
		case name == "config.yaml":
			add(src, ws.ConfigFile(), "config")
		case name == "api_key":
			add(src, ws.APIKeyFile(), "credentials")
		case ext == ".yaml" || ext == ".yml":
			add(src, filepath.Join(ws.AgentsDir(), name), "agent")
		case ext == ".db" || ext == ".sqlite" || strings.HasSuffix(name, ".db-wal") || strings.HasSuffix(name, ".db-shm"):
			add(src, filepath.Join(ws.DataDir(), name), "database")
		case ext == ".log":
			add(src, filepath.Join(ws.LogsDir(), name), "log")
		default:
			p.Left = append(p.Left, src)
		}
	}
	if data, err := os.ReadFile(filepath.Join(ws.LegacyDir, "config.yaml")); err == nil && strings.Contains(string(data), ws.LegacyDir) {
		p.Warnings = append(p.Warnings, fmt.Sprintf("config.yaml mentions %s; update those paths after the move", ws.LegacyDir))
	}
	sort.Strings(p.Conflicts)
	return p, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (a *App) workspaceMigrate(ctx context.Context, dryRun, yes bool) error {
	cfg, err := a.localConfig()
	if err != nil {
		return err
	}
	ws := cfg.Workspace
	if ws.LegacyDir == "" || ws.LegacyDir == ws.Root {
		return a.migrationNothing(ws, "the workspace is the legacy folder itself")
	}
	if st, err := os.Stat(ws.LegacyDir); err != nil || !st.IsDir() {
		return a.migrationNothing(ws, "no legacy install at "+ws.LegacyDir)
	}
	plan, err := planMigration(ws)
	if err != nil {
		return err
	}
	plan.DryRun = dryRun
	if len(plan.Moves) == 0 {
		return a.migrationNothing(ws, ws.LegacyDir+" holds nothing to move")
	}
	if !dryRun && a.localGatewayRunning(ctx) {
		return fmt.Errorf("the gateway at %s is running; stop it before migrating (nothing was moved)", a.target.URL)
	}
	if !a.jsonOut || dryRun {
		a.printPlan(plan)
	}
	if len(plan.Conflicts) > 0 {
		if a.jsonOut {
			printValue(a.Stdout, plan)
		}
		return fmt.Errorf("%d destination(s) already exist in %s; nothing was moved. Move or remove them first: %s",
			len(plan.Conflicts), ws.Root, strings.Join(plan.Conflicts, ", "))
	}
	if dryRun {
		if a.jsonOut {
			return printValue(a.Stdout, plan)
		}
		fmt.Fprintln(a.Stdout, "Dry run: nothing was moved.")
		return nil
	}
	if !yes {
		ok, err := a.confirm(fmt.Sprintf("Move %d entries from %s into %s?", len(plan.Moves), ws.LegacyDir, ws.Root))
		if err != nil {
			return err
		}
		if !ok {
			return &exitError{code: ExitFailure, msg: "migration cancelled; nothing was moved"}
		}
	}
	if err := ws.Ensure(); err != nil {
		return err
	}
	for i, m := range plan.Moves {
		if err := moveEntry(m.From, m.To); err != nil {
			return fmt.Errorf("moved %d of %d entries, then: %w (the rest is still in %s)", i, len(plan.Moves), err, ws.LegacyDir)
		}
	}
	removeEmptyDirs(ws.LegacyDir)
	plan.Done = true
	if a.jsonOut {
		return printValue(a.Stdout, plan)
	}
	fmt.Fprintf(a.Stdout, "Moved %d entries into %s.\n", len(plan.Moves), ws.Root)
	return nil
}

func (a *App) migrationNothing(ws config.Workspace, why string) error {
	if a.jsonOut {
		return printValue(a.Stdout, migrationPlan{From: ws.LegacyDir, To: ws.Root, Moves: []migrationMove{}, Left: []string{}, Conflicts: []string{}, Warnings: []string{why}})
	}
	fmt.Fprintf(a.Stdout, "Nothing to migrate: %s.\n", why)
	return nil
}

func (a *App) printPlan(p *migrationPlan) {
	out := a.Stdout
	if a.jsonOut {
		out = a.Stderr
	}
	fmt.Fprintf(out, "Migrate %s -> %s\n", p.From, p.To)
	rows := [][]string{}
	for _, m := range p.Moves {
		rows = append(rows, []string{m.Kind, m.From, m.To})
	}
	table(out, []string{"KIND", "FROM", "TO"}, rows)
	for _, l := range p.Left {
		fmt.Fprintf(out, "left in place: %s\n", l)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	for _, c := range p.Conflicts {
		fmt.Fprintf(out, "conflict: %s already exists\n", c)
	}
}

// moveEntry renames, or copies and removes across filesystems.
func moveEntry(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	if _, err := os.Lstat(to); err == nil {
		return fmt.Errorf("%s already exists", to)
	}
	if err := os.Rename(from, to); err == nil {
		return nil
	} else if !errors.Is(err, syscall.EXDEV) {
		return fmt.Errorf("move %s: %w", from, err)
	}
	if err := copyTree(from, to); err != nil {
		os.RemoveAll(to)
		return fmt.Errorf("copy %s: %w", from, err)
	}
	return os.RemoveAll(from)
}

func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		dst := filepath.Join(to, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(dst, info.Mode().Perm())
		}
		in, err := os.Open(path)
		if err != nil {
			return err
		}
		defer in.Close()
		out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, info.Mode().Perm())
		if err != nil {
			return err
		}
		if _, err := io.Copy(out, in); err != nil {
			out.Close()
			return err
		}
		return out.Close()
	})
}

func removeEmptyDirs(root string) {
	for _, sub := range legacySubdirs {
		os.Remove(filepath.Join(root, sub)) // only succeeds when empty
	}
	os.Remove(root)
}

// confirm asks a yes/no question on a terminal; without one it refuses
// (scripts pass -y / --yes).
func (a *App) confirm(question string) (bool, error) {
	if !isTerminal(a.Stdin) {
		return false, usagef("%s needs confirmation: run it in a terminal or pass --yes", strings.TrimSuffix(question, "?"))
	}
	fmt.Fprintf(a.Stderr, "%s [y/N] ", question)
	line, _ := bufio.NewReader(a.Stdin).ReadString('\n')
	ans := strings.ToLower(strings.TrimSpace(line))
	return ans == "y" || ans == "yes", nil
}
