package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	gojson "github.com/goccy/go-json"
	"github.com/gofiber/fiber/v2"
)

// decodeJSON reads a JSON object body into v. A non-JSON body, a body that
// is not an object, a field of the wrong type, a body that is not UTF-8, a
// NUL byte in any string or a string longer than its field's `maxlen` tag
// is a 400 (naming the field where there is one). A body nested deeper
// than maxJSONDepth or with more than maxJSONKeys keys is a 413, refused
// before any decoding.
func decodeJSON(c *fiber.Ctx, v any) error {
	body := c.Body()
	if len(body) == 0 {
		return badRequest("request body must be a JSON object")
	}
	if err := boundJSON(body, maxJSONKeys); err != nil {
		return err
	}
	if err := refuseBadText(body); err != nil {
		return err
	}
	// goccy/go-json decodes a request about three times faster; a body it
	// refuses is decoded again by encoding/json, which decides and words
	// the error as it always did (TestDecodeJSONAgreesWithEncodingJSON).
	if gojson.Unmarshal(body, v) != nil {
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
	}
	if field, limit := tooLong(reflect.ValueOf(v)); field != "" {
		return badRequest("%s is longer than %d characters", field, limit).With("field", field)
	}
	return nil
}

// refuseBadText is a 400 for a body that is not UTF-8, or that has a NUL
// byte in a JSON string (refuseNUL). JSON text must be UTF-8 (RFC 8259), and
// encoding/json would otherwise store each invalid byte as U+FFFD: the
// request would succeed and change the text it was sent.
func refuseBadText(body []byte) error {
	if !utf8.Valid(body) {
		return badRequest("request body is not valid UTF-8")
	}
	return refuseNUL(body)
}

// refuseNUL is a 400 naming the first JSON string of body with a NUL byte.
// A body that is not JSON is left to the decoder's error.
func refuseNUL(body []byte) error {
	if !bytes.Contains(body, []byte(`\u0000`)) {
		return nil // JSON can carry a NUL only as this escape
	}
	var doc any
	if json.Unmarshal(body, &doc) != nil {
		return nil
	}
	if bad := nulPath(doc, ""); bad != "" {
		return badRequest("%s: NUL bytes (\\u0000) are not allowed in text", bad).With("field", bad)
	}
	return nil
}

// parseID parses an id in canonical decimal: digits only, no sign, no
// leading zero, so that "+1" and "01" never name record 1.
func parseID(raw string) (int64, bool) {
	if raw == "" || len(raw) > 19 || raw[0] == '0' {
		return 0, false
	}
	for _, r := range raw {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	return n, err == nil && n > 0
}

// parseCanonicalInt parses a decimal integer written canonically (an
// optional "-", no "+", no leading zeros, no "-0").
func parseCanonicalInt(raw string) (int, bool) {
	digits := strings.TrimPrefix(raw, "-")
	if digits == "" || (len(digits) > 1 && digits[0] == '0') || raw == "-0" {
		return 0, false
	}
	for _, r := range digits {
		if r < '0' || r > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(raw)
	return n, err == nil
}

// pathInt parses an integer path parameter; anything else is a 400.
func pathInt(c *fiber.Ctx, name string) (int64, error) {
	raw := c.Params(name)
	n, ok := parseID(raw)
	if !ok {
		return 0, badRequest("%s must be a positive integer in canonical decimal form, got %q", name, raw)
	}
	return n, nil
}

// queryInt parses an optional integer query parameter within [min, max].
func queryInt(c *fiber.Ctx, name string, def, min, max int) (int, error) {
	raw := c.Query(name)
	if raw == "" {
		return def, nil
	}
	n, ok := parseCanonicalInt(raw)
	if !ok || n < min || n > max {
		return 0, badRequest("%s must be an integer between %d and %d, got %q", name, min, max, raw)
	}
	return n, nil
}

// Bounds on the work a JSON body may ask for, checked by one linear scan
// before any decoder sees it (#42: POST /agents spent 85 s of CPU on
// 100,000 keys). Any route's body: maxJSONDepth levels of nesting and
// maxJSONKeys object keys; routes with a costlier next step bound tighter
// (agent definitions: maxDefinitionKeys).
const (
	maxJSONDepth = 64
	maxJSONKeys  = 50_000
)

// jsonShape counts the object keys of a JSON text and its deepest nesting
// in one pass over the bytes, reading only structure (strings are skipped
// whole, escapes included). Malformed text is counted as far as it goes;
// the decoder words its error.
func jsonShape(body []byte) (keys, depth int) {
	level := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			for i++; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' {
					i++
				}
			}
		case ':':
			keys++
		case '{', '[':
			if level++; level > depth {
				depth = level
			}
		case '}', ']':
			level--
		}
	}
	return keys, depth
}

// tooComplex is the 413 of a body over one of the bounds, naming it.
func tooComplex(what string, got, limit int) *Error {
	return Errf(fiber.StatusRequestEntityTooLarge, "request body has %d %s, over the limit of %d", got, what, limit).
		WithCode("too_large").With("limit", what).With("max", limit)
}

// boundJSON refuses a body over maxJSONDepth or maxKeys.
func boundJSON(body []byte, maxKeys int) error {
	keys, depth := jsonShape(body)
	if depth > maxJSONDepth {
		return tooComplex("levels of nesting", depth, maxJSONDepth)
	}
	if keys > maxKeys {
		return tooComplex("object keys", keys, maxKeys)
	}
	return nil
}
