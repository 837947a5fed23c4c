package config

import (
	"fmt"
	"math"
	"reflect"
	"strings"
)

// nonFinite lists the keys under v whose number is NaN or infinite. Go's
// float parsing (environment overrides) and YAML (.nan, .inf) both accept
// them, but no key means anything by them: a NaN budget compares false with
// every spend, so it would never stop one. Only typed keys are looked at:
// values kept for keys we do not model (map[string]any) are left alone.
func nonFinite(v reflect.Value, path string) []string {
	var out []string
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			out = append(out, path)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			out = append(out, nonFinite(v.Elem(), path)...)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			sub := join(path, name)
			if name == "" || strings.Contains(opts, "inline") {
				sub = path
			}
			out = append(out, nonFinite(v.Field(i), sub)...)
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			out = append(out, nonFinite(iter.Value(), join(path, fmt.Sprint(iter.Key().Interface())))...)
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			out = append(out, nonFinite(v.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return out
}
