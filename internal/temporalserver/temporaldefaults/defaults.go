// Package temporaldefaults reads temporal.yaml (the defaults of the embedded
// Temporal server, including the search attributes it registers).
//
// It is deliberately light: it does not import go.temporal.io/server, so the
// workflows, the worker and the gateway's wiring for an external cluster can
// use the search attribute names without linking the whole server.
package temporaldefaults

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"time"

	enums "go.temporal.io/api/enums/v1"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry"
)

// SearchAttributes returns the search attributes temporal.yaml registers
// (name -> type). Their names and typed keys live beside the workflows
// that set them (workflows/search_attributes.go; a test there keeps the
// two in step).
func SearchAttributes() map[string]enums.IndexedValueType {
	f, err := Load()
	if err != nil {
		return map[string]enums.IndexedValueType{}
	}
	attrs, err := f.ParsedSearchAttributes()
	if err != nil {
		return map[string]enums.IndexedValueType{}
	}
	return attrs
}

// File is the content of temporal.yaml.
type File struct {
	Namespace string        `yaml:"namespace"`
	Retention time.Duration `yaml:"retention"`
	Embedded  Embedded      `yaml:"embedded"`
	// SearchAttributes maps a name to its type as written in the file
	// (Keyword, Int, ...); see ParsedSearchAttributes.
	SearchAttributes map[string]string `yaml:"search_attributes"`
	// DynamicConfig maps a Temporal dynamic config key to a plain value.
	DynamicConfig map[string]any `yaml:"dynamic_config"`
}

// Embedded is where the embedded server listens.
type Embedded struct {
	Host         string `yaml:"host"`
	FrontendPort int    `yaml:"frontend_port"`
	UIPort       int    `yaml:"ui_port"`
	UIEnabled    bool   `yaml:"ui_enabled"`
}

// Load parses the temporal.yaml compiled into the binary.
func Load() (File, error) {
	f, err := Parse(agentry.TemporalYAML)
	if err != nil {
		return File{}, fmt.Errorf("temporal.yaml (embedded): %w", err)
	}
	return f, nil
}

// Parse decodes and validates a temporal.yaml document. Unknown keys are an
// error so that a misspelt key does not silently leave a default in place.
func Parse(data []byte) (File, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil && !errors.Is(err, io.EOF) {
		return File{}, err
	}
	if err := f.validate(); err != nil {
		return File{}, err
	}
	return f, nil
}

func (f File) validate() error {
	var errs []error
	if f.Namespace == "" {
		errs = append(errs, errors.New("namespace: must not be empty"))
	}
	// Temporal refuses retentions under one day when a namespace is updated.
	if f.Retention < 24*time.Hour {
		errs = append(errs, fmt.Errorf("retention: %s is shorter than the minimum of 24h", f.Retention))
	}
	if net.ParseIP(f.Embedded.Host) == nil {
		errs = append(errs, fmt.Errorf("embedded.host: %q is not an IP address", f.Embedded.Host))
	}
	for key, port := range map[string]int{"embedded.frontend_port": f.Embedded.FrontendPort, "embedded.ui_port": f.Embedded.UIPort} {
		if port < 0 || port > 65535 {
			errs = append(errs, fmt.Errorf("%s: %d is not a port number", key, port))
		}
	}
	if _, err := f.ParsedSearchAttributes(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParsedSearchAttributes returns the search attributes with their types
// parsed. Type names are Temporal's short (Keyword) or enum
// (INDEXED_VALUE_TYPE_KEYWORD) spellings.
func (f File) ParsedSearchAttributes() (map[string]enums.IndexedValueType, error) {
	names := make([]string, 0, len(f.SearchAttributes))
	for name := range f.SearchAttributes {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic error messages

	out := make(map[string]enums.IndexedValueType, len(names))
	for _, name := range names {
		typ, err := enums.IndexedValueTypeFromString(f.SearchAttributes[name])
		if err != nil || typ == enums.INDEXED_VALUE_TYPE_UNSPECIFIED {
			return nil, fmt.Errorf("search_attributes.%s: unknown type %q (want Keyword, Text, Int, Double, Bool, Datetime or KeywordList)", name, f.SearchAttributes[name])
		}
		out[name] = typ
	}
	return out, nil
}
