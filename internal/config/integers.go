package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

var durationType = reflect.TypeOf(time.Duration(0))

// nonIntegers lists the keys whose value is a fractional or exponent number
// where the schema wants an integer: yaml.v3 would truncate port: 1.5 to 1.
func nonIntegers(n *yaml.Node, t reflect.Type, path string) []string {
	n, t = valueNode(n, t)
	if n == nil {
		return nil
	}
	var out []string
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if f, ok := fieldByYAMLName(t, n.Content[i].Value); ok {
				out = append(out, nonIntegers(n.Content[i+1], f.Type, join(path, n.Content[i].Value))...)
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			out = append(out, nonIntegers(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))...)
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			out = append(out, nonIntegers(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if t == durationType || n.Kind != yaml.ScalarNode {
			return nil
		}
		if n.ShortTag() == "!!float" {
			out = append(out, fmt.Sprintf("%s: %s is not an integer", path, n.Value))
		}
	}
	return out
}

func fieldByYAMLName(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// valueNode steps from n to the node that holds its value (into a
// document, through an alias) and from t to the type it decodes into
// (through pointers); a nil node is an empty document.
func valueNode(n *yaml.Node, t reflect.Type) (*yaml.Node, reflect.Type) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, t
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n, t
}
