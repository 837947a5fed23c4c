package skills

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
)

// Source kinds of an install.
const (
	SourceDir  = "dir"
	SourceGit  = "git"
	SourceSlug = "slug"
)

// invalid: the install request itself is wrong (400).
func invalid(msg string) error { return &fault.Invalid{Msg: msg} }

// refusedByPolicy: the source is not allowed for this caller (403 policy).
func refusedByPolicy(msg string) error { return &fault.Forbidden{Code: "policy", Msg: msg} }

// FetchError: the git source could not be fetched (502).
type FetchError struct {
	Source string
	Msg    string
}

func (e *FetchError) Error() string { return fmt.Sprintf("fetch %s: %s", e.Source, e.Msg) }

// Fault implements fault.Fault: 502 fetch_failed, naming the source.
func (e *FetchError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindUpstream, Code: "fetch_failed", Message: e.Error(), Fields: map[string]any{"source": e.Source}}
}

// ConsentError: the install needs (new) consent (409); the plan says what
// to consent to.
type ConsentError struct {
	Code string // "changed" or "danger_consent_required"
	Msg  string
	Plan *Plan
}

func (e *ConsentError) Error() string { return e.Msg }

// Fault implements fault.Fault: 409 with the code and the plan to consent to.
func (e *ConsentError) Fault() fault.Detail {
	return fault.Detail{Kind: fault.KindConflict, Code: e.Code, Message: e.Msg, Fields: map[string]any{"plan": e.Plan}}
}

// InstallRequest asks to review (Digest empty) or install a skill.
type InstallRequest struct {
	// Source is an absolute folder on the gateway host, a git URL
	// (https://..., optionally #sub/folder) or a slug owner/repo[/folder]
	// (GitHub).
	Source string `json:"source"`
	// Digest is the consent: install only if the fetched content still has
	// exactly this digest (from the review).
	Digest string `json:"digest,omitempty"`
	// AcceptDanger is the separate consent a danger verdict needs; the
	// client sends it only after an interactive yes.
	AcceptDanger bool `json:"accept_danger,omitempty"`
}

// DryRun is one tool's sandboxed run during the review.
type DryRun struct {
	Tool string `json:"tool"`
	Outcome
	// Skipped says why the tool was not run.
	Skipped string `json:"skipped,omitempty"`
}

// Plan is the review of a source: what would be installed and what the
// scan and the dry run saw.
type Plan struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Version     string     `json:"version,omitempty"`
	Source      string     `json:"source"`
	SourceKind  string     `json:"source_kind"`
	Digest      string     `json:"digest"`
	Tools       []Tool     `json:"tools"`
	Scan        ScanReport `json:"scan"`
	DryRun      []DryRun   `json:"dry_run"`
	// Verdict is the scan's verdict: danger always needs an interactive yes.
	Verdict string `json:"verdict"`
	// Replaces is the digest of the installed skill of the same name.
	Replaces string `json:"replaces,omitempty"`
	// Permissions are what the skill asks for at run time (network,
	// commands); installing it is the consent to them.
	Permissions Permissions `json:"permissions,omitzero"`
	Installed   bool        `json:"installed"`
	Dir         string      `json:"dir,omitempty"`
	Rescan      *Report     `json:"rescan,omitempty"`
}

// Installer reviews and installs skills into Dest (the workspace's
// skills/ folder) and rescans the registry after an install.
type Installer struct {
	Registry *Registry
	Dest     string
	// DryRunner runs each tool once during the review (network isolated
	// where user namespaces exist).
	DryRunner Runner
	// SSRF is the policy git hosts must pass.
	SSRF       netguard.Policy
	GitTimeout time.Duration

	mu sync.Mutex // one install at a time
}

var slugRe = regexp.MustCompile(`^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)

// source is a resolved install source.
type source struct {
	kind, dir, gitURL, sub string
}

// resolve reads the source text. localOK: the caller is on the gateway
// host (loopback), the only caller a host folder or file:// URL is for.
func (in *Installer) resolve(raw string, localOK bool) (source, error) {
	raw = strings.TrimSpace(raw)
	switch {
	case raw == "":
		return source{}, invalid("source is required (a folder, a git URL or owner/repo)")
	case strings.HasPrefix(raw, "/"):
		if !localOK {
			return source{}, refusedByPolicy("a local skill folder is refused for a remote client; install from a git URL or slug")
		}
		return source{kind: SourceDir, dir: filepath.Clean(raw)}, nil
	case strings.HasPrefix(raw, ".") || strings.HasPrefix(raw, "~"):
		return source{}, invalid(fmt.Sprintf("source %q: a folder must be an absolute path", raw))
	case strings.Contains(raw, "://"):
		u, frag, _ := strings.Cut(raw, "#")
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" && parsed.Scheme != "file" {
			return source{}, invalid(fmt.Sprintf("source %q is not a URL", raw))
		}
		switch parsed.Scheme {
		case "https":
		case "file":
			if !localOK {
				return source{}, refusedByPolicy("file:// sources are for clients on the gateway host only")
			}
		default:
			return source{}, invalid(fmt.Sprintf("source %q: git sources must be https:// URLs", raw))
		}
		if parsed.User != nil {
			return source{}, invalid("source URL must not carry credentials")
		}
		return source{kind: SourceGit, gitURL: u, sub: frag}, nil
	case slugRe.MatchString(raw):
		parts := strings.SplitN(raw, "/", 3)
		s := source{kind: SourceSlug, gitURL: "https://github.com/" + parts[0] + "/" + strings.TrimSuffix(parts[1], ".git") + ".git"}
		if len(parts) == 3 {
			s.sub = parts[2]
		}
		return s, nil
	}
	return source{}, invalid(fmt.Sprintf("source %q is not an absolute folder, an https:// git URL or owner/repo", raw))
}

// Install reviews the source and, when req.Digest is set, installs it.
func (in *Installer) Install(ctx context.Context, req InstallRequest, localOK bool) (*Plan, error) {
	src, err := in.resolve(req.Source, localOK)
	if err != nil {
		return nil, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	dir, cleanup, err := in.fetch(ctx, src, req.Source)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	s, err := Load(dir)
	if err != nil {
		return nil, err
	}
	plan := &Plan{Name: s.Name, Description: s.Description, Version: s.Version, Source: req.Source, SourceKind: src.kind,
		Digest: s.Digest, Tools: s.Tools, Scan: Scan(s.Dir), Dir: filepath.Join(in.Dest, s.Name), Permissions: s.Permissions}
	plan.Verdict = plan.Scan.Verdict
	if old, err := in.Registry.Get(s.Name); err == nil {
		plan.Replaces = old.Digest
	}
	plan.DryRun = in.dryRun(ctx, s, plan.Verdict)
	if req.Digest == "" {
		return plan, nil
	}
	if req.Digest != plan.Digest {
		return nil, &ConsentError{Code: "changed", Msg: fmt.Sprintf("skill %s changed since it was reviewed (digest %s, consent was for %s); review it again", s.Name, plan.Digest, req.Digest), Plan: plan}
	}
	if plan.Verdict == VerdictDanger && !req.AcceptDanger {
		return nil, &ConsentError{Code: "danger_consent_required", Msg: fmt.Sprintf("skill %s has a danger verdict: it needs an interactive yes", s.Name), Plan: plan}
	}
	if err := in.place(s); err != nil {
		return nil, err
	}
	rep := in.Registry.Rescan()
	plan.Installed, plan.Rescan = true, &rep
	return plan, nil
}

// dryRun runs every tool once with {} in a copy of the skill, without the
// network where possible. A danger verdict is not run at all.
func (in *Installer) dryRun(ctx context.Context, s *Skill, verdict string) []DryRun {
	out := []DryRun{}
	if len(s.Tools) == 0 {
		return out
	}
	if verdict == VerdictDanger {
		for _, t := range s.Tools {
			out = append(out, DryRun{Tool: t.Name, Skipped: "not run: the static scan gave a danger verdict"})
		}
		return out
	}
	copyDir, err := os.MkdirTemp("", "agentry-skill-dry-")
	if err != nil {
		return append(out, DryRun{Tool: "*", Skipped: "cannot make a sandbox folder: " + err.Error()})
	}
	defer os.RemoveAll(copyDir)
	if err := copyTree(s.Dir, copyDir); err != nil {
		return append(out, DryRun{Tool: "*", Skipped: "cannot copy the skill: " + err.Error()})
	}
	for _, t := range s.Tools {
		out = append(out, DryRun{Tool: t.Name, Outcome: in.DryRunner.Run(ctx, copyDir, t.Script, json.RawMessage("{}"), true)})
	}
	return out
}

// fetch makes the source's skill folder available; cleanup removes what
// fetch made.
func (in *Installer) fetch(ctx context.Context, src source, raw string) (string, func(), error) {
	if src.kind == SourceDir {
		fi, err := os.Stat(src.dir)
		if err != nil || !fi.IsDir() {
			return "", nil, invalid(fmt.Sprintf("source %s is not a folder on the gateway host", src.dir))
		}
		return src.dir, func() {}, nil
	}
	// git's connections go through a proxy on the SSRF policy's dialer
	// (netguard.Git): a name that resolves, rebinds or redirects to a
	// refused address is refused when connecting, not only when checked.
	g := netguard.Git{Policy: in.SSRF, AllowFile: strings.HasPrefix(src.gitURL, "file://")}
	if err := g.CheckSource(src.gitURL); err != nil {
		return "", nil, refusedByPolicy(fmt.Sprintf("source %s: %v", raw, err))
	}
	tmp, err := os.MkdirTemp("", "agentry-skill-git-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { os.RemoveAll(tmp) }
	timeout := in.GitTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	gctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	clone := filepath.Join(tmp, "repo")
	g.Home = tmp
	cmd, proxy, done, err := g.Command(gctx, "", "clone", "--depth", "1", "--no-recurse-submodules", "--quiet", "--", src.gitURL, clone)
	if err != nil {
		cleanup()
		return "", nil, err
	}
	out, err := cmd.CombinedOutput()
	done()
	if err != nil {
		cleanup()
		if blocked := proxy.Refusal(); blocked != nil {
			return "", nil, refusedByPolicy(fmt.Sprintf("source %s: %v", raw, blocked))
		}
		msg := strings.TrimSpace(string(out))
		if gctx.Err() != nil {
			msg = "timed out after " + timeout.String()
		}
		if msg == "" {
			msg = err.Error()
		}
		return "", nil, &FetchError{Source: raw, Msg: clip(msg)}
	}
	dir := clone
	if src.sub != "" {
		sub := filepath.FromSlash(src.sub)
		if !filepath.IsLocal(sub) {
			cleanup()
			return "", nil, &RefusedError{Dir: raw, Reason: fmt.Sprintf("folder %q leaves the repository", src.sub)}
		}
		dir = filepath.Join(clone, sub)
		real, err := filepath.EvalSymlinks(dir)
		if err != nil || !inside(clone, real) {
			cleanup()
			return "", nil, &RefusedError{Dir: raw, Reason: fmt.Sprintf("folder %q does not exist in the repository or leads outside it", src.sub)}
		}
	}
	return dir, cleanup, nil
}

// place copies the skill into Dest/<name>, replacing an earlier copy
// whole (a staging folder renamed into place).
func (in *Installer) place(s *Skill) error {
	if err := os.MkdirAll(in.Dest, 0o755); err != nil {
		return err
	}
	stage := filepath.Join(in.Dest, ".install-"+randHex())
	if err := copyTree(s.Dir, stage); err != nil {
		os.RemoveAll(stage)
		return fmt.Errorf("install skill %s: %w", s.Name, err)
	}
	final := filepath.Join(in.Dest, s.Name)
	old := filepath.Join(in.Dest, ".old-"+randHex())
	if _, err := os.Lstat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			os.RemoveAll(stage)
			return fmt.Errorf("install skill %s: %w", s.Name, err)
		}
		defer os.RemoveAll(old)
	}
	if err := os.Rename(stage, final); err != nil {
		os.RemoveAll(stage)
		return fmt.Errorf("install skill %s: %w", s.Name, err)
	}
	return writeConsent(in.Dest, s)
}

// copyTree copies files, folders and (inside-pointing, already checked)
// symlinks, keeping modes; .git is left out.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir() && d.Name() == ".git" && rel != ".":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case info.Mode()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case info.Mode().IsRegular():
			return copyFile(p, target, info.Mode().Perm())
		}
		return nil
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func randHex() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
