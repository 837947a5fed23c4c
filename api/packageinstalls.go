package api

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/pkginstall"
	"github.com/agentryhq/agentry/models"
)

// PackageInstallsFeature runs package install jobs
// (docs/package-install.md), behind `agentry package install`:
//
//	POST /package-installs            start a job (202 with the job)
//	GET  /package-installs            the newest jobs
//	GET  /package-installs/{job_id}   one job with its progress
type PackageInstallsFeature struct {
	Installs *pkginstall.Service
}

// Register implements Feature.
func (f *PackageInstallsFeature) Register(r fiber.Router) {
	r.Post("/package-installs", f.start)
	r.Get("/package-installs", f.list)
	r.Get("/package-installs/:job_id", f.get)
}

func (f *PackageInstallsFeature) start(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	var req pkginstall.Request
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	// A host build runs the source's code on this machine, and a file://
	// source reads any repository on its disk: admins only.
	admin := Principal(c) != nil && Principal(c).Role == auth.RoleAdmin
	if req.AllowHostBuild && !admin {
		return &Error{Status: fiber.StatusForbidden, Message: "allow_host_build needs the admin role", Code: "forbidden"}
	}
	if pkginstall.ReadsHostDisk(req.Source) && !admin {
		return &Error{Status: fiber.StatusForbidden, Message: "a file:// source reads the gateway host's disk: it needs the admin role", Code: "forbidden"}
	}
	job, err := f.Installs.Start(c.UserContext(), req)
	if err != nil { // a job Temporal did not take is a 503 naming its job_id
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(job)
}

func (f *PackageInstallsFeature) list(c *fiber.Ctx) error {
	jobs, err := f.Installs.List(c.UserContext(), 100)
	if err != nil {
		return err
	}
	if jobs == nil {
		jobs = []models.PackageInstallJob{}
	}
	return c.JSON(fiber.Map{"jobs": jobs, "count": len(jobs)})
}

func (f *PackageInstallsFeature) get(c *fiber.Ctx) error {
	job, err := f.Installs.Get(c.UserContext(), c.Params("job_id"))
	if errors.Is(err, models.ErrNotFound) {
		return notFound("package install job %q not found", c.Params("job_id"))
	}
	if err != nil {
		return err
	}
	return c.JSON(job)
}
