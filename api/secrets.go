package api

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/secrets"
)

// The REST operations behind the client's secret commands.

// SecretsFeature is the write-only secret store (admin only):
//
//	PUT    /secrets/{name}  {"value": "..."}  204
//	GET    /secrets         names and times, never values
//	DELETE /secrets/{name}  204
//	POST   /secrets/rotate  re-wrap the data keys (docs/credentials.md)
type SecretsFeature struct {
	Secrets *secrets.Store
}

// Register implements Feature.
func (f *SecretsFeature) Register(r fiber.Router) {
	r.Get("/secrets", f.list)
	r.Post("/secrets/rotate", f.rotate)
	r.Put("/secrets/:name", f.set)
	r.Delete("/secrets/:name", f.delete)
}

func (f *SecretsFeature) list(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	list, err := f.Secrets.List(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"secrets": list})
}

func (f *SecretsFeature) set(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	var b struct {
		Value *string `json:"value"`
	}
	if !utf8.Valid(c.Body()) {
		return badRequest("request body is not valid UTF-8") // a secret stored as sent, or not at all
	}
	if err := json.Unmarshal(c.Body(), &b); err != nil || b.Value == nil {
		// Never echo the body: it is the secret.
		return badRequest(`request body must be {"value": "<secret>"}`)
	}
	if err := f.Secrets.Set(c.UserContext(), c.Params("name"), *b.Value); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (f *SecretsFeature) delete(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	if err := f.Secrets.Delete(c.UserContext(), c.Params("name")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (f *SecretsFeature) rotate(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	res, err := f.Secrets.Rotate(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(res)
}
