package api

import (
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Strict text input (issue 18 item 8): NUL bytes are refused in every JSON
// string of a request body (they truncate or break C strings, log lines and
// PostgreSQL text), and free strings carry a documented length limit in a
// `maxlen:"N"` struct tag (characters), checked after decoding.

// nulPath returns the JSON path of the first string (value or object key)
// in v, decoded as `any`, that holds a NUL byte, or "".
func nulPath(v any, path string) string {
	switch x := v.(type) {
	case string:
		if strings.IndexByte(x, 0) >= 0 {
			return orBody(path)
		}
	case map[string]any:
		for k, e := range x {
			p := joinPath(path, k)
			if strings.IndexByte(k, 0) >= 0 {
				return orBody(path) + " (a key)"
			}
			if bad := nulPath(e, p); bad != "" {
				return bad
			}
		}
	case []any:
		for i, e := range x {
			if bad := nulPath(e, path+"["+strconv.Itoa(i)+"]"); bad != "" {
				return bad
			}
		}
	}
	return ""
}

func orBody(path string) string {
	if path == "" {
		return "body"
	}
	return path
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// tooLong returns the JSON path and limit of the first string field of the
// struct behind v longer than its `maxlen` tag, or "" when all fit.
func tooLong(v reflect.Value, path string) (string, int) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "", 0
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", 0
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fv := v.Field(i)
		// Lookup first: Atoi of a missing tag allocates its error, for
		// every field of every request body.
		if tag, ok := f.Tag.Lookup("maxlen"); ok && fv.Kind() == reflect.String {
			if limit, err := strconv.Atoi(tag); err == nil {
				if utf8.RuneCountInString(fv.String()) > limit {
					return joinPath(path, name), limit
				}
				continue
			}
		}
		if bad, limit := tooLong(fv, joinPath(path, name)); bad != "" {
			return bad, limit
		}
	}
	return "", 0
}
