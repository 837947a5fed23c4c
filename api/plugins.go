package api

import (
	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/auth"
	"github.com/agentryhq/agentry/internal/plugins"
)

// PluginsFeature lists the plugins (admin only):
//
//	GET  /plugins         every plugin folder, loaded or not (why not)
//	POST /plugins/rescan  rescan the folders now, then the list
type PluginsFeature struct {
	Plugins *plugins.Registry
}

// Register implements Feature.
func (f *PluginsFeature) Register(r fiber.Router) {
	r.Get("/plugins", f.list)
	r.Post("/plugins/rescan", f.rescan)
}

func (f *PluginsFeature) list(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	return c.JSON(fiber.Map{"plugins": f.Plugins.List()})
}

func (f *PluginsFeature) rescan(c *fiber.Ctx) error {
	if err := Require(c, auth.PermAdmin); err != nil {
		return err
	}
	f.Plugins.Rescan(c.UserContext())
	return c.JSON(fiber.Map{"plugins": f.Plugins.List()})
}
