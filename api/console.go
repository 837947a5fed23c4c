package api

import (
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// consoleCSP keeps the console to its own origin: scripts, styles, images
// and API calls all come from the gateway, nothing from anywhere else, and
// no other site may frame it.
const consoleCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// mountConsole serves the operator console's static files at / (GET and
// HEAD only). The files hold no data: everything they show comes from
// /api/v1 with the credential the operator signs in with.
func (s *Server) mountConsole(assets fs.FS, connect ...string) {
	csp := consoleCSP
	if len(connect) > 0 {
		csp = strings.Replace(csp, "connect-src 'self'", "connect-src 'self' "+strings.Join(connect, " "), 1)
	}
	serve := func(c *fiber.Ctx) error {
		name := strings.TrimPrefix(path.Clean("/"+c.Params("*")), "/")
		if name == "" {
			name = "index.html"
		}
		data, err := fs.ReadFile(assets, name)
		if err != nil {
			return notFound("no such page: %s", c.Path())
		}
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = http.DetectContentType(data)
		}
		c.Set(fiber.HeaderContentType, ctype)
		c.Set(fiber.HeaderContentSecurityPolicy, csp)
		c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
		c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
		// Assets change with the binary; revalidating is cheap on loopback
		// and never shows a stale console after an upgrade.
		c.Set(fiber.HeaderCacheControl, "no-cache")
		return c.Send(data)
	}
	s.app.Get("/", serve)
	s.app.Get("/console/*", serve)
}
