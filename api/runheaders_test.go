package api

import (
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
)

// TestRunHeadersAsFiberSetsThem: the run headers come out as fiber's Set
// would send them, a session id with line breaks (one a client chose)
// included.
func TestRunHeadersAsFiberSetsThem(t *testing.T) {
	for _, session := range []string{"http-3f2a", "evil\r\nSet-Cookie: x=1", "line\nbreak", "ok:with spaces"} {
		app := fiber.New()
		app.Get("/ours", func(c *fiber.Ctx) error {
			setRunHeaders(c, session, "run_0193", "resp_0193")
			return nil
		})
		app.Get("/fiber", func(c *fiber.Ctx) error {
			c.Set(HeaderSessionID, session)
			c.Set(HeaderRunID, "run_0193")
			c.Set(HeaderResponseID, "resp_0193")
			return nil
		})
		ours, err := app.Test(httptest.NewRequest("GET", "/ours", nil))
		if err != nil {
			t.Fatal(err)
		}
		want, err := app.Test(httptest.NewRequest("GET", "/fiber", nil))
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{HeaderSessionID, HeaderRunID, HeaderResponseID} {
			if got, w := ours.Header.Values(h), want.Header.Values(h); len(got) != 1 || len(w) != 1 || got[0] != w[0] {
				t.Errorf("session %q: %s = %q, fiber's Set gives %q", session, h, got, w)
			}
		}
		if ours.Header.Get("Set-Cookie") != "" {
			t.Errorf("session %q split the response headers", session)
		}
	}
}
