package api

import (
	"encoding/json"
	"net"
	"slices"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/skills"
)

// SkillsFeature serves the skills:
//
//	GET  /skills          {"skills": [...], "dirs": [...]}
//	GET  /skills/{name}   one skill with its instructions and tools
//	POST /skills/rescan   hot-load: {"added", "changed", "removed", "refused"} (admin)
//	POST /skills/install  {"source", "digest"?, "accept_danger"?} (admin): without
//	                      digest a review (200: scan, dry run, digest); with the
//	                      reviewed digest an install (201)
type SkillsFeature struct {
	Registry  *skills.Registry
	Installer *skills.Installer
}

// Register implements Feature.
func (f *SkillsFeature) Register(r fiber.Router) {
	r.Get("/skills", f.list)
	r.Post("/skills/rescan", f.rescan)
	r.Post("/skills/install", f.install)
	r.Get("/skills/:name", f.get)
}

// skillSummary is a skill in the list: no instructions.
type skillSummary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Version     string   `json:"version,omitempty"`
	Tools       []string `json:"tools"`
	Dir         string   `json:"dir"`
	Digest      string   `json:"digest"`
}

func (f *SkillsFeature) list(c *fiber.Ctx) error {
	out := []skillSummary{}
	for _, s := range f.Registry.List() {
		names := make([]string, 0, len(s.Tools))
		for _, t := range s.Tools {
			names = append(names, skills.ToolName(s.Name, t.Name))
		}
		out = append(out, skillSummary{Name: s.Name, Description: s.Description, Version: s.Version, Tools: names, Dir: s.Dir, Digest: s.Digest})
	}
	return c.JSON(fiber.Map{"skills": out, "dirs": f.Registry.Dirs()})
}

func (f *SkillsFeature) get(c *fiber.Ctx) error {
	s, err := f.Registry.Get(c.Params("name"))
	if err != nil {
		return err
	}
	return c.JSON(s)
}

func (f *SkillsFeature) rescan(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	return c.JSON(f.Registry.Rescan())
}

var skillInstallKeys = []string{"source", "digest", "accept_danger"}

func (f *SkillsFeature) install(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	for k := range raw {
		if !slices.Contains(skillInstallKeys, k) {
			return badRequest("unknown field %q (allowed: source, digest, accept_danger)", k)
		}
	}
	var req skills.InstallRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	// A folder or file:// source names the gateway host's disk: only for a
	// client on that host (the TCP peer, not a forwarded-for header; a
	// Unix-socket peer is local).
	tcp, isTCP := c.Context().RemoteAddr().(*net.TCPAddr)
	local := !isTCP || tcp.IP.IsLoopback()
	plan, err := f.Installer.Install(c.UserContext(), req, local)
	if err != nil {
		return err
	}
	if plan.Installed {
		return c.Status(fiber.StatusCreated).JSON(plan)
	}
	return c.JSON(plan)
}
