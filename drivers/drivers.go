// Package drivers is the extension point of flavored builds
// (`agentryd build --with <module>`): a driver is a Go package that calls
// Register from an init function, and a build that imports it (the
// generated main does, with a blank import) has its tools available to
// agents next to the builtins: an agent lists a driver tool in builtins
// like write_file, the model sees its schema, and the gateway runs it.
//
// This package is public (not internal/) so that modules outside this
// repository can import it, and it depends on nothing else in Agentry, so a
// driver cannot reach into the gateway's internals. See docs/build.md.
package drivers

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"sync"
)

// Tool is one tool a driver adds.
type Tool struct {
	// Name is what agents list in builtins; lower-case letters, digits, _.
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Run executes one call. The returned text goes back to the model; an
	// error is reported to the model as a failed tool call. ctx carries the
	// gateway's tool timeout.
	Run func(ctx context.Context, args json.RawMessage) (string, error)
}

// Driver is what a --with module registers.
type Driver struct {
	// Name identifies the driver (its module path is a good choice).
	Name    string
	Version string
	Tools   []Tool
}

var (
	mu      sync.RWMutex
	drivers = map[string]Driver{}
	tools   = map[string]Tool{}
)

var toolName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)

// reserved are the gateway's own builtins; a driver cannot replace them.
var reserved = map[string]bool{"write_file": true, "read_file": true, "http_get": true, "run_python": true}

// Register adds a driver. Like database/sql.Register it panics on a
// mistake (a duplicate name, a bad or taken tool name, a tool without
// Run): the mistake is in the build, and the binary must not start with it.
func Register(d Driver) {
	mu.Lock()
	defer mu.Unlock()
	if d.Name == "" {
		panic("drivers: Register with an empty name")
	}
	if _, dup := drivers[d.Name]; dup {
		panic(fmt.Sprintf("drivers: driver %q registered twice", d.Name))
	}
	for _, t := range d.Tools {
		switch {
		case !toolName.MatchString(t.Name):
			panic(fmt.Sprintf("drivers: driver %q: tool name %q must be lower-case letters, digits or _", d.Name, t.Name))
		case reserved[t.Name]:
			panic(fmt.Sprintf("drivers: driver %q: tool %q is a gateway builtin", d.Name, t.Name))
		case t.Run == nil:
			panic(fmt.Sprintf("drivers: driver %q: tool %q has no Run", d.Name, t.Name))
		}
		if _, dup := tools[t.Name]; dup {
			panic(fmt.Sprintf("drivers: driver %q: tool %q is registered by another driver", d.Name, t.Name))
		}
	}
	drivers[d.Name] = d
	for _, t := range d.Tools {
		if len(t.Parameters) == 0 {
			t.Parameters = json.RawMessage(`{"type":"object"}`)
		}
		tools[t.Name] = t
	}
}

// All lists the registered drivers by name.
func All() []Driver {
	mu.RLock()
	defer mu.RUnlock()
	out := make([]Driver, 0, len(drivers))
	for _, d := range drivers {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupTool finds a driver tool by name.
func LookupTool(name string) (Tool, bool) {
	mu.RLock()
	defer mu.RUnlock()
	t, ok := tools[name]
	return t, ok
}
