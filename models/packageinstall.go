package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Package install jobs (`agentry package install <git URL>`,
// docs/package-install.md): one row per job, written before its
// PackageInstall workflow is started with the row's id as workflow id, and
// updated by the workflow's activities as the job moves through its steps.

// Package install job statuses.
const (
	PackageInstallQueued    = "queued"
	PackageInstallRunning   = "running"
	PackageInstallSucceeded = "succeeded"
	PackageInstallFailed    = "failed"
)

// PackageInstallJob is one install of an agent package from a git source.
type PackageInstallJob struct {
	// ID is the job id and the id of its PackageInstall workflow.
	ID     string `gorm:"primaryKey;size:64" json:"id"`
	Source string `gorm:"size:2048;not null" json:"source"`
	// The approvals and import options the job was created with.
	AllowUnverified bool `json:"allow_unverified"`
	AllowHostBuild  bool `json:"allow_host_build"`
	Enable          bool `json:"enable"`
	Overwrite       bool `json:"overwrite"`

	Status string `gorm:"size:16;index" json:"status"`
	// Step is the step running or last run: fetch, verify, build, install.
	Step string `gorm:"size:16" json:"step"`
	// Commit is the fetched commit; AgentID, Checksum and Signed describe
	// the verified package.
	Commit   string `gorm:"size:64" json:"commit,omitempty"`
	AgentID  string `gorm:"size:191" json:"agent_id,omitempty"`
	Checksum string `gorm:"size:100" json:"checksum,omitempty"`
	Signed   bool   `json:"signed"`
	// Error is why the job failed (scrubbed like every error column).
	Error string `json:"error,omitempty"`

	// ProgressJSON holds []PackageInstallProgress.
	ProgressJSON string                   `gorm:"column:progress" json:"-"`
	Progress     []PackageInstallProgress `gorm:"-" json:"progress"`
	// PackageDoc is the verified package document the install step
	// installs, kept here so any worker can install it.
	PackageDoc string `gorm:"column:package_doc" json:"-"`

	CreatedAt  time.Time  `gorm:"index" json:"created_at"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// TableName implements gorm's Tabler.
func (PackageInstallJob) TableName() string { return "package_install_jobs" }

// PackageInstallProgress is one line of a job's progress.
type PackageInstallProgress struct {
	At      time.Time `json:"at"`
	Step    string    `json:"step"`
	Message string    `json:"message"`
}

// Done reports whether the job has finished.
func (j *PackageInstallJob) Done() bool {
	return j.Status == PackageInstallSucceeded || j.Status == PackageInstallFailed
}

func (j *PackageInstallJob) decode() error {
	j.Progress = []PackageInstallProgress{}
	if j.ProgressJSON == "" {
		return nil
	}
	return json.Unmarshal([]byte(j.ProgressJSON), &j.Progress)
}

// CreatePackageInstallJob inserts a new job (a second insert of one id
// fails).
func (s *Store) CreatePackageInstallJob(ctx context.Context, j *PackageInstallJob) error {
	now := time.Now().UTC()
	j.CreatedAt, j.UpdatedAt = now, now
	if j.Progress == nil {
		j.Progress = []PackageInstallProgress{}
	}
	b, _ := json.Marshal(j.Progress)
	j.ProgressJSON = string(b)
	if err := s.DB.WithContext(ctx).Create(j).Error; err != nil {
		return fmt.Errorf("create package install job: %w", err)
	}
	return nil
}

// GetPackageInstallJob reads a job (ErrNotFound).
func (s *Store) GetPackageInstallJob(ctx context.Context, id string) (*PackageInstallJob, error) {
	var j PackageInstallJob
	err := s.DB.WithContext(ctx).First(&j, "id = ?", id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("read package install job %s: %w", id, err)
	}
	return &j, j.decode()
}

// ListPackageInstallJobs lists the newest jobs first; unfinishedOnly keeps
// the queued and running ones.
func (s *Store) ListPackageInstallJobs(ctx context.Context, limit int, unfinishedOnly bool) ([]PackageInstallJob, error) {
	var jobs []PackageInstallJob
	q := s.DB.WithContext(ctx).Order("created_at DESC, id").Limit(limit)
	if unfinishedOnly {
		q = q.Where("status IN ?", []string{PackageInstallQueued, PackageInstallRunning})
	}
	if err := q.Find(&jobs).Error; err != nil {
		return nil, fmt.Errorf("list package install jobs: %w", err)
	}
	for i := range jobs {
		if err := jobs[i].decode(); err != nil {
			return nil, err
		}
	}
	return jobs, nil
}

// UpdatePackageInstallJob changes a job in one transaction: fn gets the
// current row and may change it; the row is saved when fn returns nil.
func (s *Store) UpdatePackageInstallJob(ctx context.Context, id string, fn func(*PackageInstallJob) error) (*PackageInstallJob, error) {
	var out *PackageInstallJob
	err := s.DB.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var j PackageInstallJob
		if err := tx.First(&j, "id = ?", id).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return ErrNotFound
			}
			return err
		}
		if err := j.decode(); err != nil {
			return err
		}
		if err := fn(&j); err != nil {
			return err
		}
		b, err := json.Marshal(j.Progress)
		if err != nil {
			return err
		}
		j.ProgressJSON = string(b)
		j.UpdatedAt = time.Now().UTC()
		if err := tx.Save(&j).Error; err != nil {
			return err
		}
		out = &j
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("update package install job %s: %w", id, err)
	}
	return out, nil
}
