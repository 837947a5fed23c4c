package api

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/mcp"
)

// MCPFeature registers MCP servers through the API (admin only):
//
//	PUT    /mcp/own/{id}  {"transport": "http", "url", "headers"} or
//	                      {"transport": "stdio", "command", "args", "env"}
//	                      201 created / 200 updated, with the server's status
//	GET    /mcp/own       {"servers": [...]} every server (config and API)
//	GET    /mcp/own/{id}  one server's status
//	DELETE /mcp/own/{id}  204
//
// The server is contacted and its tools listed before PUT answers; header
// and env values are never returned (names only).
type MCPFeature struct {
	Registry *mcp.Registry
}

// Register implements Feature.
func (f *MCPFeature) Register(r fiber.Router) {
	r.Get("/mcp/own", f.list)
	r.Get("/mcp/own/:id", f.get)
	r.Put("/mcp/own/:id", f.put)
	r.Delete("/mcp/own/:id", f.delete)
}

var mcpBodyKeys = []string{"transport", "url", "headers", "command", "args", "env"}

func (f *MCPFeature) put(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var raw map[string]json.RawMessage
	if err := decodeJSON(c, &raw); err != nil {
		return err
	}
	for k := range raw {
		if !slices.Contains(mcpBodyKeys, k) {
			return badRequest("unknown field %q (allowed: transport, url, headers, command, args, env)", k)
		}
	}
	var spec mcp.Spec
	if err := decodeJSON(c, &spec); err != nil {
		return err
	}
	// Fiber reuses the request buffer: the id outlives the request.
	spec.ID = strings.Clone(c.Params("id"))
	created, st, err := f.Registry.Put(c.UserContext(), spec)
	if err != nil {
		return err
	}
	status := fiber.StatusOK
	if created {
		status = fiber.StatusCreated
	}
	return c.Status(status).JSON(st)
}

func (f *MCPFeature) list(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"servers": f.Registry.List()})
}

func (f *MCPFeature) get(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	st, err := f.Registry.Get(c.Params("id"))
	if err != nil {
		return err
	}
	return c.JSON(st)
}

func (f *MCPFeature) delete(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	if err := f.Registry.Delete(c.UserContext(), c.Params("id")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}
