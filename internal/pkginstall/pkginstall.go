// Package pkginstall runs package install jobs (`agentry package install
// <git URL>`, docs/package-install.md): a job is a database row plus a
// PackageInstall workflow with the row's id as workflow id. The row is
// written first and the workflow started idempotently after it (and again
// by Resume at every start of the gateway for rows not finished), so a job
// cannot exist without its workflow or the other way round. The steps the
// workflow's activities run (fetch, verify, build, install) are methods of
// Service; each records its progress in the row.
package pkginstall

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/fault"
	"github.com/agentryhq/agentry/internal/netguard"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/models"
	"github.com/agentryhq/agentry/workflows"
)

// ErrInvalid marks a request the API answers with 400.
var ErrInvalid = &fault.Error{Kind: fault.KindInvalid, Code: fault.CodeInvalid, Field: "source", Msg: "invalid package install request"}

// ErrUnavailable marks a job recorded but not started (Temporal did not
// answer); Resume starts it later. The API answers 503.
var ErrUnavailable = errors.New("package install job not started")

// Service records jobs, starts their workflows and runs their steps.
type Service struct {
	Store     models.PackageInstallStore
	Temporal  client.Client
	TaskQueue string
	// Packages verifies and installs the package a job produced.
	Packages *agentpkg.Service
	// WorkDir holds one checkout folder per running job.
	WorkDir string
	// TrustedKeys are the signers whose packages count as verified (the
	// registries' signing keys); nil trusts none.
	TrustedKeys func() []ed25519.PublicKey
	// HostBuilds says which sources may be built on the gateway host.
	HostBuilds HostBuildPolicy
	// SSRF is the policy every fetch passes (runtime.ssrf): git's
	// connections go through a proxy on its dialer (netguard.Git).
	SSRF netguard.Policy
	Log  *slog.Logger
}

// gitFetch is how this service runs git against a source: http, https
// and file (the API lets only admins name a file:// source) through the
// SSRF policy's proxy.
func (s *Service) gitFetch() netguard.Git {
	return netguard.Git{Policy: s.SSRF, AllowHTTP: true, AllowFile: true}
}

// CheckSource refuses, before a job is recorded, a source the SSRF
// policy refuses without resolving it (a literal private address, ssh to
// a host not in allowed_hosts): 403 naming the policy and the address.
func (s *Service) CheckSource(src string) error {
	if err := s.gitFetch().CheckSource(src); err != nil {
		return &fault.Forbidden{Code: "policy", Msg: fmt.Sprintf("source %s: %v", src, err)}
	}
	return nil
}

// Request is what the client asks for.
type Request struct {
	Source          string `json:"source" maxlen:"2048"`
	AllowUnverified bool   `json:"allow_unverified"`
	AllowHostBuild  bool   `json:"allow_host_build"`
	Enable          bool   `json:"enable"`
	Overwrite       bool   `json:"overwrite"`
}

// scpLike is git's user@host:path form.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:[^\s]+$`)

// ValidateSource accepts git URLs (https, http, ssh, git, file) and the
// scp-like user@host:path form; nothing that git could read as an option.
func ValidateSource(src string) error {
	if src == "" {
		return fmt.Errorf("%w: source is empty: give a git URL", ErrInvalid)
	}
	if strings.HasPrefix(src, "-") || strings.ContainsAny(src, " \t\r\n\x00") {
		return fmt.Errorf("%w: source %q is not a git URL", ErrInvalid, src)
	}
	if scpLike.MatchString(src) {
		return nil
	}
	u, err := url.Parse(src)
	if err != nil {
		return fmt.Errorf("%w: source %q is not a git URL: %v", ErrInvalid, src, err)
	}
	// The source is stored in the job and shown in its progress, so it
	// must not carry a secret; the gateway host reaches private
	// repositories with its own ssh key or git credential helper.
	if _, hasPassword := u.User.Password(); hasPassword {
		return fmt.Errorf("%w: source %s carries a password: jobs store their source, so give the gateway host its own access (ssh key or git credential helper) and use a URL without credentials", ErrInvalid, u.Redacted())
	}
	switch u.Scheme {
	case "https", "http", "ssh", "git":
		if u.Host == "" {
			return fmt.Errorf("%w: source %q has no host", ErrInvalid, src)
		}
	case "file":
		if u.Path == "" {
			return fmt.Errorf("%w: source %q has no path", ErrInvalid, src)
		}
	default:
		return fmt.Errorf("%w: source %q: want an https, http, ssh, git or file URL, or user@host:path", ErrInvalid, src)
	}
	return nil
}

// ReadsHostDisk reports whether source names a repository on the gateway
// host's own disk (file://), which only admins may install from.
func ReadsHostDisk(source string) bool {
	scheme, _, ok := strings.Cut(strings.TrimSpace(source), ":")
	return ok && strings.EqualFold(scheme, "file")
}

// NewJobID is a fresh job id ("pkginstall-" and 16 hex digits).
func NewJobID() string {
	b := make([]byte, 8)
	rand.Read(b)
	return "pkginstall-" + hex.EncodeToString(b)
}

// Start records a job and starts its workflow. The row is written first;
// when Temporal does not answer the job stays queued, ErrUnavailable is
// returned with it, and Resume starts it later.
func (s *Service) Start(ctx context.Context, req Request) (*models.PackageInstallJob, error) {
	req.Source = strings.TrimSpace(req.Source)
	if err := ValidateSource(req.Source); err != nil {
		return nil, err
	}
	if err := s.CheckSource(req.Source); err != nil {
		return nil, err
	}
	if req.AllowHostBuild {
		if err := s.HostBuilds.Allows(req.Source); err != nil {
			return nil, err
		}
	}
	job := &models.PackageInstallJob{ID: NewJobID(), Source: req.Source, AllowUnverified: req.AllowUnverified,
		AllowHostBuild: req.AllowHostBuild, Enable: req.Enable, Overwrite: req.Overwrite, Status: models.PackageInstallQueued,
		Progress: []models.PackageInstallProgress{{At: time.Now().UTC(), Step: "queued", Message: "job created for " + req.Source}}}
	if err := s.Store.CreatePackageInstallJob(ctx, job); err != nil {
		return nil, err
	}
	if err := s.startWorkflow(ctx, job.ID); err != nil {
		// 503 with the job's id: the caller can follow the queued job.
		return job, &fault.Error{Kind: fault.KindUnavailable, Code: fault.CodeTemporalUnavailable, RetryAfter: fault.TemporalRetry,
			Msg:    fmt.Sprintf("%s: %v (it starts when the gateway reaches Temporal again)", ErrUnavailable, err),
			Fields: map[string]any{"job_id": job.ID}, Err: ErrUnavailable}
	}
	return job, nil
}

// startWorkflow starts the job's workflow; a workflow of that id that runs
// or ran already is the job's own, and is left alone.
func (s *Service) startWorkflow(ctx context.Context, jobID string) error {
	_, err := s.Temporal.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.PackageInstallWorkflowID(jobID),
		TaskQueue:                s.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		WorkflowExecutionTimeout: time.Hour,
		StaticSummary:            "package install " + jobID,
	}, workflows.PackageInstallWorkflowName, workflows.PackageInstallInput{Version: workflows.PackageInstallInputVersion, JobID: jobID})
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if err != nil && !errors.As(err, &started) {
		return err
	}
	return nil
}

// Resume starts the workflows of the jobs not finished (a job recorded
// while Temporal was away); starting one that exists does nothing.
func (s *Service) Resume(ctx context.Context) error {
	jobs, err := s.Store.ListPackageInstallJobs(ctx, 1000, true)
	if err != nil {
		return err
	}
	var errs []error
	for _, j := range jobs {
		if err := s.startWorkflow(ctx, j.ID); err != nil {
			errs = append(errs, fmt.Errorf("job %s: %w", j.ID, err))
		}
	}
	return errors.Join(errs...)
}

// RunResume calls Resume now and every interval until ctx ends.
func (s *Service) RunResume(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.Resume(ctx); err != nil && ctx.Err() == nil {
			s.Log.Warn("resume package install jobs", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Get reads a job (models.ErrNotFound).
func (s *Service) Get(ctx context.Context, id string) (*models.PackageInstallJob, error) {
	return s.Store.GetPackageInstallJob(ctx, id)
}

// List lists the newest jobs first.
func (s *Service) List(ctx context.Context, limit int) ([]models.PackageInstallJob, error) {
	return s.Store.ListPackageInstallJobs(ctx, limit, false)
}

// progress appends a line to a job's progress (and sets its step, status
// running unless it finished) through fn's other changes.
func (s *Service) progress(ctx context.Context, jobID, step, msg string, fn func(*models.PackageInstallJob)) (*models.PackageInstallJob, error) {
	return s.Store.UpdatePackageInstallJob(ctx, jobID, func(j *models.PackageInstallJob) error {
		j.Step = step
		if !j.Done() {
			j.Status = models.PackageInstallRunning
		}
		j.Progress = append(j.Progress, models.PackageInstallProgress{At: time.Now().UTC(), Step: step, Message: scrub.String(msg)})
		if fn != nil {
			fn(j)
		}
		return nil
	})
}
