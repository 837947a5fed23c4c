package config

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// The configuration reference as the code has it: every leaf key of
// Config, found through the yaml tags. Entries of keyed maps are written
// <id> (llm.providers.<id>.api_key), elements of lists [] (hooks[].url).
// Sections kept as free-form maps (mcp, memory, ...) are leaves. The
// inline Extra maps (keys this version does not model) are not keys.

func leafKeys() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch {
		case t.Kind() == reflect.Struct && t != durationType:
			for i := range t.NumField() {
				f := t.Field(i)
				name := strings.Split(f.Tag.Get("yaml"), ",")[0]
				if name == "" || name == "-" {
					continue
				}
				walk(f.Type, join(prefix, name))
			}
		case t.Kind() == reflect.Map && structLike(t.Elem()):
			walk(t.Elem(), prefix+".<id>")
		case t.Kind() == reflect.Slice && structLike(t.Elem()):
			walk(t.Elem(), prefix+"[]")
		default:
			out = append(out, prefix)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	sort.Strings(out)
	return out
}

func structLike(t reflect.Type) bool { return t.Kind() == reflect.Struct && t != durationType }

// filledConfig is a configuration with every leaf set to a non-zero value
// (strings are "v-<key>", so a test can find each one) and one entry in
// every keyed map and list.
func filledConfig() Config {
	var c Config
	var fill func(v reflect.Value, key string)
	fill = func(v reflect.Value, key string) {
		t := v.Type()
		switch {
		case t == durationType:
			v.SetInt(int64(time.Second))
		case t.Kind() == reflect.Pointer:
			v.Set(reflect.New(t.Elem()))
			fill(v.Elem(), key)
		case t.Kind() == reflect.Struct:
			for i := range t.NumField() {
				f := t.Field(i)
				name := strings.Split(f.Tag.Get("yaml"), ",")[0]
				if name == "" || name == "-" {
					continue
				}
				fill(v.Field(i), join(key, name))
			}
		case t.Kind() == reflect.Map && structLike(t.Elem()):
			e := reflect.New(t.Elem()).Elem()
			fill(e, key+".<id>")
			v.Set(reflect.MakeMap(t))
			v.SetMapIndex(reflect.ValueOf("<id>"), e)
		case t.Kind() == reflect.Slice && structLike(t.Elem()):
			e := reflect.New(t.Elem()).Elem()
			fill(e, key+"[]")
			v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), e))
		case t.Kind() == reflect.Map:
			m := reflect.MakeMap(t)
			m.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("v-"+key).Convert(t.Elem()))
			v.Set(m)
		case t.Kind() == reflect.Slice:
			v.Set(reflect.ValueOf([]string{"v-" + key}))
		case t.Kind() == reflect.String:
			v.SetString("v-" + key)
		case t.Kind() == reflect.Bool:
			v.SetBool(true)
		case t.Kind() == reflect.Int || t.Kind() == reflect.Int64:
			v.SetInt(7)
		case t.Kind() == reflect.Float64:
			v.SetFloat(0.5)
		default:
			panic(fmt.Sprintf("%s: fill a %s", key, t))
		}
	}
	fill(reflect.ValueOf(&c).Elem(), "")
	return c
}

// flattenKeys maps each leaf of a decoded tree to its value, with the key
// spelling of leafKeys ([] for list elements; free-form maps are one leaf
// whose value is the map).
func flattenKeys(v any, prefix string, free map[string]bool, out map[string]any) {
	switch t := v.(type) {
	case map[string]any:
		if free[prefix] {
			out[prefix] = t
			return
		}
		for k, val := range t {
			flattenKeys(val, join(prefix, k), free, out)
		}
	case []any:
		if free[prefix] {
			out[prefix] = t
			return
		}
		for _, val := range t {
			flattenKeys(val, prefix+"[]", free, out)
		}
	default:
		out[prefix] = v
	}
}

// visible reports whether the value filledConfig put under key survives
// redaction (a free-form map: any of its values).
func visible(key string, v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, x := range t {
			if x != Redacted {
				return true
			}
		}
		return false
	case []any:
		return len(t) > 0 && t[0] != Redacted
	case nil:
		return false
	default:
		return v != Redacted
	}
}
