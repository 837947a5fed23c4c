package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/agentryhq/agentry/internal/llm"
)

// The REST operation behind the gateway-side checks of `agentry doctor`
// (spec "Command-line client", group setup).

// DiagnosticsFeature answers what only the gateway can check for `agentry
// doctor`:
//
//	GET /diagnostics   {"checks": [{"name", "status": "ok"|"fail", "detail"}]}
//
// Today: whether the default LLM provider answers at its base URL (any
// HTTP answer counts; no inference is made, nothing is billed).
type DiagnosticsFeature struct {
	Router *llm.Router
	// HTTP is the client used for the reachability probe.
	HTTP *http.Client
}

// Register implements Feature.
func (f *DiagnosticsFeature) Register(r fiber.Router) { r.Get("/diagnostics", f.diagnostics) }

type diagnosticCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

func (f *DiagnosticsFeature) diagnostics(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 5*time.Second)
	defer cancel()
	return c.JSON(fiber.Map{"checks": []diagnosticCheck{f.defaultProvider(ctx)}})
}

func (f *DiagnosticsFeature) defaultProvider(ctx context.Context) diagnosticCheck {
	chk := diagnosticCheck{Name: "default_provider"}
	id := f.Router.DefaultProvider()
	p, ok := f.Router.Provider(id)
	if !ok {
		chk.Status, chk.Detail = "fail", fmt.Sprintf("default provider %q is not configured", id)
		return chk
	}
	client := f.HTTP
	if client == nil {
		client = &http.Client{Timeout: 3 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.Address(), nil)
	if err != nil {
		chk.Status, chk.Detail = "fail", fmt.Sprintf("provider %s: bad base URL %q", id, p.Address())
		return chk
	}
	resp, err := client.Do(req)
	if err != nil {
		chk.Status, chk.Detail = "fail", fmt.Sprintf("provider %s at %s is not reachable: %v", id, p.Address(), rootErr(err))
		return chk
	}
	resp.Body.Close()
	chk.Status, chk.Detail = "ok", fmt.Sprintf("provider %s answers at %s (HTTP %d)", id, p.Address(), resp.StatusCode)
	return chk
}

func rootErr(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
