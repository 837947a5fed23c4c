package api

import (
	"encoding/json"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/auth"
)

// AgentPackagesFeature exports, inspects and imports agent packages
// (docs/packages.md), so a remote gateway can be the target of the
// client's `agent package` commands:
//
//	GET  /agents/{agent_id}/package   the agent as an unsigned package
//	POST /agent-packages/inspect      verify a package, list what this gateway lacks
//	POST /agent-packages/import       verify and install (?enable=true, ?overwrite=true)
type AgentPackagesFeature struct {
	Packages *agentpkg.Service
}

// Register implements Feature.
func (f *AgentPackagesFeature) Register(r fiber.Router) {
	r.Get("/agents/:agent_id/package", f.export)
	r.Post("/agent-packages/inspect", f.inspect)
	r.Post("/agent-packages/import", f.importPackage)
}

// exportReply carries the package and the bundle files left out.
type exportReply struct {
	Package json.RawMessage `json:"package"`
	Skipped []string        `json:"skipped"`
}

func (f *AgentPackagesFeature) export(c *fiber.Ctx) error {
	ex, err := f.Packages.Export(c.Params("agent_id"))
	if err != nil {
		return err
	}
	doc, err := ex.Package.Marshal()
	if err != nil {
		return err
	}
	skipped := ex.Skipped
	if skipped == nil {
		skipped = []string{}
	}
	return c.JSON(exportReply{Package: doc, Skipped: skipped})
}

func (f *AgentPackagesFeature) inspect(c *fiber.Ctx) error {
	if len(c.Body()) == 0 {
		return badRequest("request body is empty: send the package document")
	}
	_, rep, err := f.Packages.Inspect(c.UserContext(), c.Body())
	if err != nil {
		return err
	}
	return c.JSON(rep)
}

// importReply is the installed agent and the inspection report.
type importReply struct {
	Agent  agentDetail      `json:"agent"`
	Report *agentpkg.Report `json:"report"`
}

func (f *AgentPackagesFeature) importPackage(c *fiber.Ctx) error {
	if err := Require(c, auth.PermWrite); err != nil {
		return err
	}
	enable, err := queryBool(c, "enable")
	if err != nil {
		return err
	}
	overwrite, err := queryBool(c, "overwrite")
	if err != nil {
		return err
	}
	if len(c.Body()) == 0 {
		return badRequest("request body is empty: send the package document")
	}
	def, rep, err := f.Packages.Import(c.UserContext(), c.Body(), enable, overwrite)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(importReply{Agent: agentSingle(def), Report: rep})
}

func queryBool(c *fiber.Ctx, name string) (bool, error) {
	v := c.Query(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("query %s: %q is not true or false", name, v)
	}
	return b, nil
}
