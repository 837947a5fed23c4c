package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentryhq/agentry/models"
)

// PackageInstallJob is a package install job as the gateway stores and
// sends it (the models type itself, not a copy).
type PackageInstallJob struct {
	Raw
	models.PackageInstallJob
}

// PackageInstallRequest is the body of POST /package-installs.
type PackageInstallRequest struct {
	Source          string `json:"source"`
	AllowUnverified bool   `json:"allow_unverified,omitempty"`
	AllowHostBuild  bool   `json:"allow_host_build,omitempty"`
	Enable          bool   `json:"enable,omitempty"`
	Overwrite       bool   `json:"overwrite,omitempty"`
}

// StartPackageInstall creates a package install job on the gateway.
func (c *Client) StartPackageInstall(ctx context.Context, req PackageInstallRequest) (*PackageInstallJob, error) {
	var j PackageInstallJob
	return &j, c.Do(ctx, http.MethodPost, "/package-installs", req, &j)
}

// PackageInstall reads a job and its progress.
func (c *Client) PackageInstall(ctx context.Context, id string) (*PackageInstallJob, error) {
	var j PackageInstallJob
	return &j, c.Do(ctx, http.MethodGet, "/package-installs/"+url.PathEscape(id), nil, &j)
}
