package api

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
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
func tooLong(v reflect.Value) (string, int) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return "", 0
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", 0
	}
	for _, c := range lengthChecksOf(v.Type()) {
		fv := v.Field(c.index)
		if !c.nested {
			if utf8.RuneCountInString(fv.String()) > c.limit {
				return c.name, c.limit
			}
			continue
		}
		// The path is joined only for a field that is too long: joined for
		// every nested field, it cost allocations on every request.
		if bad, limit := tooLong(fv); bad != "" {
			return joinPath(c.name, bad), limit
		}
	}
	return "", 0
}

// lengthCheck is one field tooLong looks at: a string with a limit, or a
// field that may hold a struct (nested).
type lengthCheck struct {
	index  int
	name   string // in JSON
	limit  int
	nested bool
}

// lengthChecks holds each struct type's lengthChecks, found once: reading
// the tags of every field of every request body cost about a microsecond
// per chat request.
var lengthChecks sync.Map // reflect.Type -> []lengthCheck

func lengthChecksOf(t reflect.Type) []lengthCheck {
	if c, ok := lengthChecks.Load(t); ok {
		return c.([]lengthCheck)
	}
	var out []lengthCheck
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
		if tag, ok := f.Tag.Lookup("maxlen"); ok && f.Type.Kind() == reflect.String {
			if limit, err := strconv.Atoi(tag); err == nil {
				out = append(out, lengthCheck{index: i, name: name, limit: limit})
				continue
			}
		}
		switch f.Type.Kind() {
		case reflect.Struct, reflect.Pointer, reflect.Interface:
			out = append(out, lengthCheck{index: i, name: name, nested: true})
		}
	}
	lengthChecks.Store(t, out)
	return out
}
