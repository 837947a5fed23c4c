package api

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"
)

// decodeJSON reads a JSON object body into v. A non-JSON body, a body that
// is not an object, or a field of the wrong type is a 400 naming the field.
func decodeJSON(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(body) == 0 {
		return badRequest("request body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return badRequest("field %s: expected %s, got %s", te.Field, te.Type.String(), te.Value)
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return badRequest("request body is not valid JSON: %v", err)
		}
		return badRequest("invalid request body: %v", err)
	}
	return nil
}

// pathInt parses an integer path parameter; anything else is a 400.
func pathInt(c *fiber.Ctx, name string) (int64, error) {
	raw := c.Params(name)
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n <= 0 {
		return 0, badRequest("%s must be a positive integer, got %q", name, raw)
	}
	return n, nil
}

// queryInt parses an optional integer query parameter within [min, max].
func queryInt(c *fiber.Ctx, name string, def, min, max int) (int, error) {
	raw := c.Query(name)
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < min || n > max {
		return 0, badRequest("%s must be an integer between %d and %d, got %q", name, min, max, raw)
	}
	return n, nil
}
