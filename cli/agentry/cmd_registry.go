package agentry

import (
	"crypto/ed25519"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/registry"
)

// Registries are client-side: registry list|probe|add read and edit the
// local config.yaml and talk to registries directly, never to the gateway
// (docs/registry.md).

func (a *App) registrySources() ([]registry.Source, error) {
	cfg, err := a.localConfig()
	if err != nil {
		return nil, err
	}
	return registry.Sources(cfg.Registries)
}

func (a *App) registryCommand() *cobra.Command {
	list := &cobra.Command{
		Use:   "list",
		Short: "List the configured registries (registries: in config.yaml), in the order pull asks them",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sources, err := a.registrySources()
			if err != nil {
				return err
			}
			type row struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				BaseURL  string `json:"base_url"`
				Priority int    `json:"priority"`
				KeyID    string `json:"signing_key_id,omitempty"`
				Headers  int    `json:"auth_headers"`
			}
			rows := []row{}
			for _, s := range sources {
				r := row{ID: s.ID, Type: s.Type, BaseURL: s.BaseURL, Priority: s.Priority, Headers: len(s.AuthHeaders)}
				if s.SigningKey != nil {
					r.KeyID = agentpkg.KeyID(s.SigningKey)
				}
				rows = append(rows, r)
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"registries": rows})
			}
			if len(rows) == 0 {
				fmt.Fprintln(a.Stdout, "No registries configured. Add one with `agentry registry add <url>`.")
				return nil
			}
			var t [][]string
			for _, r := range rows {
				key := "- (unsigned accepted)"
				if r.KeyID != "" {
					key = r.KeyID
				}
				t = append(t, []string{r.ID, r.Type, strconv.Itoa(r.Priority), r.BaseURL, key})
			}
			table(a.Stdout, []string{"ID", "TYPE", "PRIORITY", "BASE URL", "SIGNING KEY"}, t)
			return nil
		},
	}

	probe := &cobra.Command{
		Use:   "probe URL",
		Short: "Ask a registry for its index (from this machine) and summarize it",
		Args:  exactArgs(1, "URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			src, ix, err := a.probe(cmd, args[0])
			if err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"base_url": src.BaseURL, "index": ix})
			}
			a.printIndex(src.BaseURL, ix)
			return nil
		},
	}

	var id string
	var priority int
	var yes bool
	add := &cobra.Command{
		Use:   "add URL [--id ID] [--priority N] [-y]",
		Short: "Probe a registry and add it to config.yaml, pinning its signing key when it signs",
		Args:  exactArgs(1, "URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, err := a.registrySources()
			if err != nil {
				return err
			}
			src, ix, err := a.probe(cmd, args[0])
			if err != nil {
				return fmt.Errorf("%w; nothing was added", err)
			}
			if id == "" {
				id = registryIDFor(src.BaseURL)
			}
			if !registry.SlugPattern.MatchString(id) {
				return usagef("--id %q: use lower-case letters, digits, ., - or _", id)
			}
			for _, s := range sources {
				if s.ID == id {
					return fmt.Errorf("a registry with id %q exists (%s); choose another --id", id, s.BaseURL)
				}
				if s.BaseURL == src.BaseURL {
					return fmt.Errorf("%s is already configured as registry %q", src.BaseURL, s.ID)
				}
			}
			if priority <= 0 {
				priority = registry.DefaultPriority
			}
			a.printIndex(src.BaseURL, ix)
			if !yes {
				q := fmt.Sprintf("Add registry %q (%s) accepting unsigned packages?", id, src.BaseURL)
				if ix.PublicKey != "" {
					q = fmt.Sprintf("Add registry %q (%s) and trust its signing key %s?", id, src.BaseURL, ix.KeyID)
				}
				ok, err := a.confirm(q)
				if err != nil {
					return err
				}
				if !ok {
					return &exitError{code: ExitFailure, msg: "not added"}
				}
			}
			path, err := a.configFileForWrite()
			if err != nil {
				return err
			}
			entry := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			entry.Content = append(entry.Content, config.StringNode("id"), config.StringNode(id), config.StringNode("type"), config.StringNode(registry.TypeAgentry),
				config.StringNode("base_url"), config.StringNode(src.BaseURL), config.StringNode("priority"), config.ValueNode(priority))
			if ix.PublicKey != "" {
				entry.Content = append(entry.Content, config.StringNode("signing_key"), config.StringNode(ix.PublicKey))
			}
			if err := config.EditFile(path, func(root *yaml.Node) error {
				for i := 0; i+1 < len(root.Content); i += 2 {
					if root.Content[i].Value == "registries" {
						seq := root.Content[i+1]
						if seq.Kind != yaml.SequenceNode {
							return fmt.Errorf("%s: registries is not a list", path)
						}
						seq.Style &^= yaml.FlowStyle
						seq.Content = append(seq.Content, entry)
						return nil
					}
				}
				root.Content = append(root.Content, config.StringNode("registries"), &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{entry}})
				return nil
			}, nil); err != nil {
				return err
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"id": id, "base_url": src.BaseURL, "priority": priority, "signing_key_id": ix.KeyID, "file": path})
			}
			fmt.Fprintf(a.Stdout, "Added registry %q (%s, priority %d) to %s.\n", id, src.BaseURL, priority, path)
			return nil
		},
	}
	add.Flags().StringVar(&id, "id", "", "registry id (default: from the URL's host)")
	add.Flags().IntVar(&priority, "priority", 0, fmt.Sprintf("lower is asked first (default %d)", registry.DefaultPriority))
	add.Flags().BoolVarP(&yes, "yes", "y", false, "add without asking (trusting the registry's signing key)")

	g := group("registry", "Package registries (client-side): list, probe, add", list, probe, add)
	for _, c := range g.Commands() {
		c.Annotations = map[string]string{annotationNoTarget: "true"}
	}
	return g
}

// probe reads a registry's index; URL may be the base URL or its
// index.json.
func (a *App) probe(cmd *cobra.Command, raw string) (registry.Source, *registry.Index, error) {
	base := strings.TrimRight(strings.TrimSuffix(strings.TrimSpace(raw), registry.IndexPath), "/")
	if err := registry.CheckBaseURL(base); err != nil {
		return registry.Source{}, nil, usagef("registry URL: %v", err)
	}
	src := registry.Source{ID: "probe", Type: registry.TypeAgentry, BaseURL: base}
	ix, err := registry.NewFetcher().Index(cmd.Context(), src)
	return src, ix, err
}

func (a *App) printIndex(base string, ix *registry.Index) {
	signed := "no (packages are not signed)"
	if ix.PublicKey != "" {
		signed = "yes, key " + ix.KeyID + " (" + ix.PublicKey + ")"
	}
	keyValues(a.Stdout, [][2]string{{"registry", base}, {"packages", strconv.Itoa(len(ix.Packages))}, {"signed", signed}})
	for _, e := range ix.Packages {
		vs := make([]string, 0, len(e.Versions))
		for _, v := range e.Versions {
			vs = append(vs, v.Version)
		}
		fmt.Fprintf(a.Stdout, "  %s: %s\n", e.Slug, strings.Join(vs, ", "))
	}
}

var nonID = regexp.MustCompile(`[^a-z0-9_.-]+`)

// registryIDFor derives an id from a URL's host ("registry.example.com"
// -> "registry.example.com", "127.0.0.1:18790" -> "127.0.0.1-18790").
func registryIDFor(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return "registry"
	}
	id := strings.Trim(nonID.ReplaceAllString(strings.ToLower(u.Host), "-"), "-.")
	if id == "" {
		return "registry"
	}
	return id
}

// pullCommand is `agentry pull`: download, verify and unpack a package on
// this machine. It changes this machine, so it is refused for remote
// targets before anything is fetched or written.
func (a *App) pullCommand() *cobra.Command {
	var dir string
	var force bool
	cmd := &cobra.Command{
		Use:   "pull <registry-id/slug[@version] | slug[@version] | owner/repo | URL> [--dir DIR] [--force]",
		Short: "Download, verify and unpack a package (into <workspace>/packages/<slug> by default)",
		Args:  exactArgs(1, "REFERENCE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sources, err := a.registrySources()
			if err != nil {
				return err
			}
			ref, err := registry.ParseRef(args[0], sources)
			if err != nil {
				return usagef("%v", err)
			}
			if dir == "" {
				cfg, err := a.localConfig()
				if err != nil {
					return fmt.Errorf("%w (or pass --dir)", err)
				}
				dir = filepath.Join(cfg.Workspace.Root, "packages")
			}
			f := registry.NewFetcher()
			progress := func(format string, v ...any) {
				if !a.jsonOut {
					fmt.Fprintf(a.Stderr, format+"\n", v...)
				}
			}
			progress("Resolving %s ...", args[0])
			res, err := f.Resolve(cmd.Context(), ref, sources)
			if err != nil {
				return err
			}
			dest := filepath.Join(dir, res.Slug)
			progress("Downloading %s@%s from %s ...", res.Slug, res.Version.Version, res.URL)
			data, err := f.Download(cmd.Context(), res)
			if err != nil {
				return fmt.Errorf("%w; nothing was written", err)
			}
			// Without a registry signature to check, a signing key
			// applies to each agent package inside.
			var trusted []ed25519.PublicKey
			if res.Source.SigningKey != nil && !res.Signed {
				trusted = []ed25519.PublicKey{res.Source.SigningKey}
			}
			progress("Verifying and unpacking into %s ...", dest)
			u, err := registry.Unpack(data, dest, force, res.StripTop, trusted)
			if err != nil {
				return fmt.Errorf("%s@%s refused: %w; nothing was written", res.Slug, res.Version.Version, err)
			}
			verified := "checksum verified"
			if res.Version.SHA256 == "" {
				verified = "no registry checksum (direct download)"
			}
			if res.Signed {
				verified = "signature by key " + agentpkg.KeyID(res.Source.SigningKey) + " verified"
			}
			if a.jsonOut {
				return printValue(a.Stdout, map[string]any{"slug": res.Slug, "version": res.Version.Version, "registry": res.Source.ID,
					"url": res.URL, "sha256": res.Version.SHA256, "signed": res.Signed, "dir": u.Dir, "files": u.Files, "agent_packages": u.Packages})
			}
			fmt.Fprintf(a.Stdout, "Pulled %s@%s from %s into %s (%d file(s), %s).\n", res.Slug, res.Version.Version, res.Source.ID, u.Dir, len(u.Files), verified)
			for _, p := range u.Packages {
				fmt.Fprintf(a.Stdout, "  agent package %s: import it with `agentry agent package import %s`\n", p, filepath.Join(u.Dir, p))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "folder to unpack into (default <workspace>/packages)")
	cmd.Flags().BoolVar(&force, "force", false, "replace an existing package folder")
	cmd.Annotations = map[string]string{AnnotationHostChanging: "true"}
	return cmd
}
