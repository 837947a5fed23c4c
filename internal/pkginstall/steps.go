package pkginstall

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentryhq/agentry/internal/agentdef"
	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/models"
)

// The layout of a package source (docs/package-install.md): at the root of
// the repository either one finished package, or an agent definition with
// its bundle folders beside it and, optionally, a build script.
const (
	// DefinitionFile is the agent definition of a source repository.
	DefinitionFile = "agent.yaml"
	// BuildScript asks for a build on the gateway host before packaging.
	BuildScript = "agentry-build.sh"
)

// RefusedError is a step's failure that retrying cannot fix (a missing
// approval, a failed verification, not a repository): the workflow does
// not retry it.
type RefusedError struct{ Msg string }

func (e *RefusedError) Error() string { return e.Msg }

func refused(format string, args ...any) error {
	return &RefusedError{Msg: fmt.Sprintf(format, args...)}
}

// checkoutDir is the job's checkout folder.
func (s *Service) checkoutDir(jobID string) string { return filepath.Join(s.WorkDir, jobID) }

// Fetch clones the job's source (shallow, into a fresh folder) and
// records the commit.
func (s *Service) Fetch(ctx context.Context, jobID string) (string, error) {
	job, err := s.Get(ctx, jobID)
	if err != nil {
		return "", err
	}
	if _, err := s.progress(ctx, jobID, "fetch", "fetching "+job.Source, nil); err != nil {
		return "", err
	}
	dir := s.checkoutDir(jobID)
	if err := s.clone(ctx, job.Source, dir); err != nil {
		return "", err
	}
	commit, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", fmt.Errorf("read the fetched commit: %w", err)
	}
	_, err = s.progress(ctx, jobID, "fetch", fmt.Sprintf("fetched %s at commit %s", job.Source, short(commit)),
		func(j *models.PackageInstallJob) { j.Commit = commit })
	return commit, err
}

// clone makes dir a shallow clone of src. git's connections go through
// the SSRF policy's proxy (netguard.Git): a refused address fails the job
// for good, naming the policy and the address.
func (s *Service) clone(ctx context.Context, src, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	// Checked again here: the policy may have changed since the job was
	// accepted.
	g := s.gitFetch()
	if err := g.CheckSource(src); err != nil {
		return refused("fetch %s: %v", src, err)
	}
	cmd, proxy, done, err := g.Command(ctx, "", "clone", "--quiet", "--depth", "1", "--no-tags", "--no-recurse-submodules", "--", src, dir)
	if err != nil {
		return err
	}
	defer done()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	err = cmd.Run()
	if err == nil {
		return nil
	}
	os.RemoveAll(dir)
	if errors.Is(err, exec.ErrNotFound) {
		return refused("package install needs git on the gateway host, and git is not on PATH")
	}
	if blocked := proxy.Refusal(); blocked != nil {
		return refused("fetch %s: %v", src, blocked)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	text := fmt.Sprintf("git clone: %v: %s", err, strings.TrimSpace(tail(errb.String(), 400)))
	for _, permanent := range []string{"not a git repository", "does not appear to be a git repository", "not found", "does not exist", "Could not read from remote", "unable to find remote helper", "Authentication failed", "transport '", "not allowed"} {
		if strings.Contains(text, permanent) {
			return refused("fetch %s: not a git repository this gateway can read: %s", src, text)
		}
	}
	return fmt.Errorf("fetch %s: %s", src, text)
}

// ensureCheckout makes sure the job's checkout exists at the fetched
// commit (a step may run on another worker, or after the folder was
// cleaned up).
func (s *Service) ensureCheckout(ctx context.Context, job *models.PackageInstallJob) (string, error) {
	dir := s.checkoutDir(job.ID)
	if head, err := git(ctx, dir, "rev-parse", "HEAD"); err == nil && head == job.Commit {
		return dir, nil
	}
	if err := s.clone(ctx, job.Source, dir); err != nil {
		return "", err
	}
	if head, err := git(ctx, dir, "rev-parse", "HEAD"); err != nil || head != job.Commit {
		return "", refused("the source moved on since it was fetched (commit %s, now %s): start the install again", short(job.Commit), short(head))
	}
	return dir, nil
}

// Verify finds the package in the checkout and checks it against the
// job's approvals. A finished package (*.agentry-agent.json) is verified
// when a trusted key signed it; raw source (agent.yaml) is unverified. An
// unverified source needs --allow-unverified, a build script
// --allow-host-build. When no build follows, the verified package is
// stored for the install step. needsBuild tells whether a build follows.
func (s *Service) Verify(ctx context.Context, jobID string) (needsBuild bool, err error) {
	job, err := s.progress(ctx, jobID, "verify", "verifying the fetched source", nil)
	if err != nil {
		return false, err
	}
	dir, err := s.ensureCheckout(ctx, job)
	if err != nil {
		return false, err
	}
	packages, _ := filepath.Glob(filepath.Join(dir, "*"+agentpkg.Extension))
	switch {
	case len(packages) > 1:
		return false, refused("the source holds %d packages (%s); it must hold one", len(packages), strings.Join(baseNames(packages), ", "))
	case len(packages) == 1:
		return false, s.verifyPackage(ctx, job, packages[0])
	}
	if _, err := os.Stat(filepath.Join(dir, DefinitionFile)); err != nil {
		return false, refused("no package (*%s) and no %s at the root of %s", agentpkg.Extension, DefinitionFile, job.Source)
	}
	if !job.AllowUnverified {
		return false, refused("%s is raw agent source, not a signed package: approve it with --allow-unverified", job.Source)
	}
	if _, err := os.Stat(filepath.Join(dir, BuildScript)); err == nil {
		if !job.AllowHostBuild {
			return false, refused("%s has a build script (%s) that would run on the gateway host: approve it with --allow-host-build", job.Source, BuildScript)
		}
		_, err := s.progress(ctx, jobID, "verify", "raw source approved (--allow-unverified); a build on the gateway host follows (--allow-host-build)", nil)
		return true, err
	}
	return false, s.packageSource(ctx, job, dir, "verify", "raw source approved (--allow-unverified)")
}

// verifyPackage checks a finished package and stores it.
func (s *Service) verifyPackage(ctx context.Context, job *models.PackageInstallJob, path string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	p, err := agentpkg.Verify(doc, agentpkg.VerifyOptions{})
	if err != nil {
		return refused("package %s: %v", filepath.Base(path), err)
	}
	trusted := s.trustedKeys()
	verified := false
	if p.Signature != nil && len(trusted) > 0 {
		_, err := agentpkg.Verify(doc, agentpkg.VerifyOptions{TrustedKeys: trusted})
		verified = err == nil
	}
	how := "signed by a trusted key " + keyID(p)
	if !verified {
		switch {
		case p.Signature == nil:
			how = "unsigned"
		default:
			how = "signed by key " + keyID(p) + ", which no configured registry trusts"
		}
		if !job.AllowUnverified {
			return refused("package %s is %s: approve it with --allow-unverified", filepath.Base(path), how)
		}
		how += ", approved with --allow-unverified"
	}
	return s.store(ctx, job.ID, "verify", p, doc, fmt.Sprintf("package %s (agent %s, %s) verified: %s", filepath.Base(path), p.AgentID(), p.Checksum, how))
}

// packageSource builds the package of raw source in dir and stores it.
func (s *Service) packageSource(ctx context.Context, job *models.PackageInstallJob, dir, step, note string) error {
	def, err := os.ReadFile(filepath.Join(dir, DefinitionFile))
	if err != nil {
		return refused("read %s: %v", DefinitionFile, err)
	}
	ex, err := agentpkg.Build(def, dir, "agentry package install "+job.Source)
	if err != nil {
		return refused("package the source: %v", err)
	}
	doc, err := ex.Package.Marshal()
	if err != nil {
		return err
	}
	p, err := agentpkg.Verify(doc, agentpkg.VerifyOptions{})
	if err != nil {
		return refused("package the source: %v", err)
	}
	msg := fmt.Sprintf("%s; packaged agent %s (%s, %d file(s))", note, p.AgentID(), p.Checksum, len(p.Files))
	if len(ex.Skipped) > 0 {
		msg += "; left out: " + strings.Join(ex.Skipped, ", ")
	}
	return s.store(ctx, job.ID, step, p, doc, msg)
}

// store keeps the verified package in the job's row for the install step.
func (s *Service) store(ctx context.Context, jobID, step string, p *agentpkg.Package, doc []byte, msg string) error {
	_, err := s.progress(ctx, jobID, step, msg, func(j *models.PackageInstallJob) {
		j.PackageDoc, j.AgentID, j.Checksum, j.Signed = string(doc), p.AgentID(), p.Checksum, p.Signature != nil
	})
	return err
}

// Build runs the source's build script on the gateway host, in the
// checkout, with a minimal environment, then packages the result. A
// script that fails is a refusal (its last output lines are the reason).
func (s *Service) Build(ctx context.Context, jobID string) error {
	// Checked again here: the policy may have changed since the job was
	// accepted (a restart with a new configuration).
	job, err := s.Get(ctx, jobID)
	if err != nil {
		return err
	}
	if err := s.HostBuilds.Allows(job.Source); err != nil {
		return refused("%v", err)
	}
	job, err = s.progress(ctx, jobID, "build", "running "+BuildScript+" on the gateway host", nil)
	if err != nil {
		return err
	}
	dir, err := s.ensureCheckout(ctx, job)
	if err != nil {
		return err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "sh", BuildScript)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "LANG=C"}
	// Its own process group, stopped whole when the step ends, and gone
	// with the gateway (a crash restarts the step, not a second script).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return refused("%s failed (%v): %s", BuildScript, err, tail(out.String(), 600))
	}
	return s.packageSource(ctx, job, dir, "build", fmt.Sprintf("%s finished in %s", BuildScript, time.Since(start).Round(100*time.Millisecond)))
}

// Install installs the stored package, disabled unless the job asked for
// --enable; an existing agent needs --overwrite. A retry after a crash
// finds the agent installed with the same definition and counts it done,
// so the install happens once.
func (s *Service) Install(ctx context.Context, jobID string) (string, error) {
	job, err := s.Get(ctx, jobID)
	if err != nil {
		return "", err
	}
	if job.PackageDoc == "" {
		return "", refused("no verified package to install")
	}
	p, err := agentpkg.Verify([]byte(job.PackageDoc), agentpkg.VerifyOptions{})
	if err != nil {
		return "", refused("the stored package: %v", err)
	}
	state := "disabled (enable it with agentry agent enable " + p.AgentID() + ")"
	if job.Enable {
		state = "enabled"
	}
	// An earlier attempt of this step got as far as installing when the
	// job's step already says so.
	resumed := job.Step == "install"
	if _, err := s.progress(ctx, jobID, "install", "installing agent "+p.AgentID(), nil); err != nil {
		return "", err
	}
	if done, err := s.alreadyInstalled(job, p); err != nil {
		return "", err
	} else if !resumed || !done {
		if _, _, err := s.Packages.Import(ctx, []byte(job.PackageDoc), job.Enable, job.Overwrite); err != nil {
			if errors.Is(err, agentdef.ErrExists) || agentpkg.KindOf(err) != "" {
				return "", refused("install: %v", err)
			}
			return "", err
		}
	}
	now := time.Now().UTC()
	_, err = s.progress(ctx, jobID, "install", fmt.Sprintf("installed agent %s, %s", p.AgentID(), state), func(j *models.PackageInstallJob) {
		j.Status, j.FinishedAt, j.Error = models.PackageInstallSucceeded, &now, ""
	})
	if err == nil {
		os.RemoveAll(s.checkoutDir(jobID))
	}
	return p.AgentID(), err
}

// alreadyInstalled reports whether the agent's definition file is exactly
// what this job's install writes (an earlier attempt of the step finished
// the install and then lost its answer).
func (s *Service) alreadyInstalled(job *models.PackageInstallJob, p *agentpkg.Package) (bool, error) {
	def, ok := s.Packages.Files.Registry.Get(p.AgentID())
	if !ok {
		return false, nil
	}
	text, err := p.Definition()
	if err != nil {
		return false, err
	}
	if text, err = agentdef.WithEnabled(text, job.Enable); err != nil {
		return false, err
	}
	have, err := os.ReadFile(def.File)
	return err == nil && bytes.Equal(have, text), nil
}

// Fail ends a job as failed.
func (s *Service) Fail(ctx context.Context, jobID, reason string) error {
	now := time.Now().UTC()
	_, err := s.progress(ctx, jobID, "failed", reason, func(j *models.PackageInstallJob) {
		j.Status, j.Error, j.FinishedAt = models.PackageInstallFailed, reason, &now
	})
	os.RemoveAll(s.checkoutDir(jobID))
	return err
}

func (s *Service) trustedKeys() []ed25519.PublicKey {
	if s.TrustedKeys == nil {
		return nil
	}
	return s.TrustedKeys()
}

// git runs git with prompts off and returns its trimmed output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true", "GIT_SSH_COMMAND=ssh -o BatchMode=yes")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return "", refused("package install needs git on the gateway host, and git is not on PATH")
		}
		return "", fmt.Errorf("git %s: %v: %s", args[0], err, strings.TrimSpace(tail(errb.String(), 400)))
	}
	return strings.TrimSpace(out.String()), nil
}

func keyID(p *agentpkg.Package) string {
	if p.Signature == nil {
		return ""
	}
	return p.Signature.KeyID
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func baseNames(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = filepath.Base(p)
	}
	return out
}
