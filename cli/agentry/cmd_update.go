package agentry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/config"
)

// Manifest is the release manifest (updates.manifest_url or
// AGENTRY_UPDATE_MANIFEST):
//
//	{"version": "1.4.0",
//	 "platforms": {"linux/amd64": {"url": "agentry-linux-amd64", "sha256": "<hex>"}}}
//
// A relative url resolves against the manifest's own location.
type Manifest struct {
	Version   string                      `json:"version"`
	Platforms map[string]ManifestPlatform `json:"platforms"`
	Notes     string                      `json:"notes,omitempty"`
}

// ManifestPlatform is one platform's binary.
type ManifestPlatform struct {
	URL    string `json:"url"`
	SHA256 string `json:"sha256"`
}

// Platform is this binary's manifest key.
func Platform() string { return runtime.GOOS + "/" + runtime.GOARCH }

// manifestSource is --manifest, else AGENTRY_UPDATE_MANIFEST /
// updates.manifest_url of the local configuration.
func (a *App) manifestSource(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if v, ok := a.Env(config.EnvUpdateManifest); ok && strings.TrimSpace(v) != "" {
		return strings.TrimSpace(v), nil
	}
	if a.cfg != nil && a.cfg.Updates.ManifestURL != "" {
		return a.cfg.Updates.ManifestURL, nil
	}
	return "", usagef("no release manifest: pass --manifest FILE|URL, set %s or updates.manifest_url", config.EnvUpdateManifest)
}

// fetch reads a file path, file:// URL or http(s) URL, up to limit bytes.
func fetch(ctx context.Context, src string, timeout time.Duration, w io.Writer, limit int64) error {
	u, err := url.Parse(src)
	if err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("fetch %s: %w", src, err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("fetch %s: HTTP %d", src, resp.StatusCode)
		}
		n, err := io.Copy(w, io.LimitReader(resp.Body, limit+1))
		if err == nil && n > limit {
			err = fmt.Errorf("fetch %s: larger than %d bytes", src, limit)
		}
		return err
	}
	path := src
	if err == nil && u.Scheme == "file" {
		path = u.Path
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, limit+1))
	if err == nil && n > limit {
		err = fmt.Errorf("%s: larger than %d bytes", src, limit)
	}
	return err
}

func loadManifest(ctx context.Context, src string) (*Manifest, error) {
	var b strings.Builder
	if err := fetch(ctx, src, 15*time.Second, &b, 1<<20); err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal([]byte(b.String()), &m); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", src, err)
	}
	if m.Version == "" {
		return nil, fmt.Errorf("manifest %s: no version", src)
	}
	return &m, nil
}

// resolveRef makes a manifest-relative URL absolute.
func resolveRef(manifestSrc, ref string) string {
	if u, err := url.Parse(ref); err == nil && u.Scheme != "" {
		return ref
	}
	if filepath.IsAbs(ref) {
		return ref
	}
	if mu, err := url.Parse(manifestSrc); err == nil && (mu.Scheme == "http" || mu.Scheme == "https") {
		r, _ := url.Parse(ref)
		return mu.ResolveReference(r).String()
	}
	path := manifestSrc
	if mu, err := url.Parse(manifestSrc); err == nil && mu.Scheme == "file" {
		path = mu.Path
	}
	return filepath.Join(filepath.Dir(path), ref)
}

// compareVersions compares dotted numeric versions (a leading v and a
// -suffix are ignored); ok is false when either does not parse.
func compareVersions(a, b string) (int, bool) {
	pa, ok1 := parseVersion(a)
	pb, ok2 := parseVersion(b)
	if !ok1 || !ok2 {
		return 0, false
	}
	for i := 0; i < 3; i++ {
		if pa[i] != pb[i] {
			if pa[i] < pb[i] {
				return -1, true
			}
			return 1, true
		}
	}
	return 0, true
}

func parseVersion(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(strings.TrimSpace(v), "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

type updateReport struct {
	Current         string `json:"current"`
	Latest          string `json:"latest"`
	UpdateAvailable bool   `json:"update_available"`
	Platform        string `json:"platform"`
	URL             string `json:"url,omitempty"`
	SHA256          string `json:"sha256,omitempty"`
	Binary          string `json:"binary,omitempty"`
	DryRun          bool   `json:"dry_run,omitempty"`
	Installed       bool   `json:"installed"`
}

func (a *App) updateCommand() *cobra.Command {
	var manifestFlag string
	var dryRun, yes, force bool
	check := &cobra.Command{
		Use:   "check [--manifest FILE|URL]",
		Short: "Compare this client with the release manifest",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := a.manifestSource(manifestFlag)
			if err != nil {
				return err
			}
			m, err := loadManifest(cmd.Context(), src)
			if err != nil {
				return err
			}
			rep := a.report(m, src)
			if a.jsonOut {
				return printValue(a.Stdout, rep)
			}
			if rep.UpdateAvailable {
				fmt.Fprintf(a.Stdout, "Update available: %s -> %s (agentry update install --manifest %s)\n", rep.Current, rep.Latest, src)
			} else {
				fmt.Fprintf(a.Stdout, "agentry %s is up to date.\n", rep.Current)
			}
			return nil
		},
	}
	install := &cobra.Command{
		Use:   "install [--manifest FILE|URL] [--dry-run] [--yes]",
		Short: "Download this platform's binary, verify its SHA-256 and replace this client atomically",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			src, err := a.manifestSource(manifestFlag)
			if err != nil {
				return err
			}
			m, err := loadManifest(cmd.Context(), src)
			if err != nil {
				return err
			}
			return a.install(cmd.Context(), m, src, dryRun, yes, force)
		},
	}
	for _, c := range []*cobra.Command{check, install} {
		c.Flags().StringVar(&manifestFlag, "manifest", "", "release manifest: file path or URL (default: AGENTRY_UPDATE_MANIFEST or updates.manifest_url)")
	}
	install.Flags().BoolVar(&dryRun, "dry-run", false, "download and verify, but do not replace the binary")
	install.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	install.Flags().BoolVar(&force, "force", false, "install even when the manifest's version is not newer")
	return group("update", "Check for and install client releases", check, install)
}

func (a *App) report(m *Manifest, src string) updateReport {
	rep := updateReport{Current: a.Version, Latest: m.Version, Platform: Platform()}
	if cmp, ok := compareVersions(a.Version, m.Version); ok {
		rep.UpdateAvailable = cmp < 0
	} else {
		rep.UpdateAvailable = strings.TrimPrefix(a.Version, "v") != strings.TrimPrefix(m.Version, "v")
	}
	if p, ok := m.Platforms[rep.Platform]; ok {
		rep.URL, rep.SHA256 = resolveRef(src, p.URL), strings.ToLower(p.SHA256)
	}
	return rep
}

func (a *App) install(ctx context.Context, m *Manifest, src string, dryRun, yes, force bool) error {
	rep := a.report(m, src)
	rep.DryRun = dryRun
	if rep.URL == "" {
		return fmt.Errorf("the manifest has no binary for %s", rep.Platform)
	}
	if len(rep.SHA256) != 64 {
		return fmt.Errorf("the manifest's sha256 for %s is not 64 hex characters; refusing to install an unverifiable binary", rep.Platform)
	}
	if !rep.UpdateAvailable && !force {
		if a.jsonOut {
			return printValue(a.Stdout, rep)
		}
		fmt.Fprintf(a.Stdout, "agentry %s is up to date (manifest: %s); --force reinstalls.\n", a.Version, m.Version)
		return nil
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(self); err == nil {
		self = resolved
	}
	rep.Binary = self
	if !yes && !dryRun {
		ok, err := a.confirm(fmt.Sprintf("Replace %s (%s) with %s?", self, a.Version, m.Version))
		if err != nil {
			return err
		}
		if !ok {
			return &exitError{code: ExitFailure, msg: "update cancelled; nothing changed"}
		}
	}
	// Download beside the binary so the final rename stays on one
	// filesystem (atomic), hashing while writing.
	tmp, err := os.CreateTemp(filepath.Dir(self), ".agentry-update-*")
	if err != nil {
		return fmt.Errorf("cannot write beside %s: %w", self, err)
	}
	tmpName := tmp.Name()
	defer os.Remove(tmpName) // a no-op after the rename
	h := sha256.New()
	err = fetch(ctx, rep.URL, 10*time.Minute, io.MultiWriter(tmp, h), 1<<30)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download %s: %w", rep.URL, err)
	}
	got := hex.EncodeToString(h.Sum(nil))
	if got != rep.SHA256 {
		return fmt.Errorf("checksum mismatch for %s: the manifest says sha256 %s, the download is %s; %s was not replaced", rep.URL, rep.SHA256, got, self)
	}
	if dryRun {
		if a.jsonOut {
			return printValue(a.Stdout, rep)
		}
		fmt.Fprintf(a.Stdout, "Dry run: %s verified (sha256 %s); %s would be replaced with %s.\n", rep.URL, got, self, m.Version)
		return nil
	}
	mode := os.FileMode(0o755)
	if st, err := os.Stat(self); err == nil {
		mode = st.Mode().Perm() | 0o111
	}
	if err := os.Chmod(tmpName, mode); err != nil {
		return fmt.Errorf("make the new binary executable: %w", err)
	}
	if err := os.Rename(tmpName, self); err != nil {
		return fmt.Errorf("replace %s: %w", self, err)
	}
	rep.Installed = true
	if a.jsonOut {
		return printValue(a.Stdout, rep)
	}
	fmt.Fprintf(a.Stdout, "Installed agentry %s at %s (sha256 verified).\n", m.Version, self)
	return nil
}
