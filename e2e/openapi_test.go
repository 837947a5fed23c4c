package e2e

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/dev/gatewaytest"
)

// docs/openapi.yaml is the contract clients are generated from, so it has
// to follow the code: these tests fail when a route is registered but not
// described, when a described route no longer exists, or when the
// document itself is broken (does not parse, dangling $ref, undeclared
// path parameters).

// openAPIMethods are the operation keys of an OpenAPI path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// skippedMethods are registered implicitly (Fiber adds HEAD for every GET)
// or never served as API operations.
var skippedMethods = []string{fiber.MethodHead, fiber.MethodOptions, fiber.MethodConnect, fiber.MethodTrace, "USE"}

// fiberParam matches a Fiber path parameter (":id", optional ":id?").
var fiberParam = regexp.MustCompile(`:([A-Za-z0-9_]+)\??`)

// templateParam matches an OpenAPI path template parameter ("{id}").
var templateParam = regexp.MustCompile(`\{([^{}/]+)\}`)

func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	doc := loadOpenAPI(t)
	documented := doc.operations(t)

	g := gatewaytest.Start(t, gatewaytest.Options{})
	registered := registeredOperations(g.API().App().GetRoutes(true))
	if len(registered) == 0 {
		t.Fatal("the gateway registered no routes")
	}

	var missing, stale []string
	for op := range registered {
		if !documented[op] {
			missing = append(missing, op)
		}
	}
	for op := range documented {
		if !registered[op] {
			stale = append(stale, op)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "docs/openapi.yaml does not match the routes the gateway registers (%d registered, %d documented).\n",
			len(registered), len(documented))
		if len(missing) > 0 {
			fmt.Fprintf(&b, "Registered but not documented (add them to docs/openapi.yaml):\n  %s\n", strings.Join(missing, "\n  "))
		}
		if len(stale) > 0 {
			fmt.Fprintf(&b, "Documented but not registered (stale; remove or fix them):\n  %s\n", strings.Join(stale, "\n  "))
		}
		b.WriteString("Paths in the document are relative to their server URL (/api/v1 unless a path-level servers entry says otherwise).")
		t.Fatal(b.String())
	}
}

func TestOpenAPIDocumentIsConsistent(t *testing.T) {
	doc := loadOpenAPI(t)
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi: %q, want 3.1.x", doc.OpenAPI)
	}
	if len(doc.Servers) == 0 {
		t.Error("the document has no servers entry")
	}
	if len(doc.Paths) == 0 {
		t.Fatal("the document has no paths")
	}
	if problems := danglingRefs(&doc.root); len(problems) > 0 {
		t.Errorf("$refs that do not resolve to a component:\n  %s", strings.Join(problems, "\n  "))
	}
	if problems := doc.pathParameterProblems(); len(problems) > 0 {
		t.Errorf("path parameters:\n  %s", strings.Join(problems, "\n  "))
	}
	// Every route needs the bearer token except those that opt out
	// explicitly (GET /health), so the global requirement must be there.
	if len(doc.Security) == 0 {
		t.Error("the document has no global security requirement")
	}
}

// openAPIDoc is the part of the document the tests read, plus its node
// tree for the $ref checks.
type openAPIDoc struct {
	OpenAPI  string                          `yaml:"openapi"`
	Servers  []openAPIServer                 `yaml:"servers"`
	Security []map[string][]string           `yaml:"security"`
	Paths    map[string]map[string]yaml.Node `yaml:"paths"`

	root yaml.Node
}

type openAPIServer struct {
	URL string `yaml:"url"`
}

// loadOpenAPI reads docs/openapi.yaml next to this package.
func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test file")
	}
	path := filepath.Join(filepath.Dir(self), "..", "docs", "openapi.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the OpenAPI document: %v", err)
	}
	// Decoding into maps catches duplicate keys anywhere in the document
	// (a second "get:" of a path would silently replace the first).
	var generic any
	if err := yaml.Unmarshal(data, &generic); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	var doc openAPIDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	if err := yaml.Unmarshal(data, &doc.root); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	return &doc
}

// serverPath is the path part of a server URL ("/api/v1"), without a
// trailing slash.
func serverPath(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("server url %q: %v", raw, err)
	}
	return strings.TrimSuffix(u.Path, "/")
}

// operations returns "METHOD /full/path" for every documented operation:
// the path is prefixed with the path of its server (the path item's own
// servers entry, else the document's), so GET /health with its
// root-level server and /whoami under /api/v1 are compared alike.
func (d *openAPIDoc) operations(t *testing.T) map[string]bool {
	t.Helper()
	if len(d.Servers) == 0 {
		t.Fatal("the document has no servers entry")
	}
	base := serverPath(t, d.Servers[0].URL)
	ops := map[string]bool{}
	for path, item := range d.Paths {
		prefix := base
		if node, ok := item["servers"]; ok {
			var servers []openAPIServer
			if err := node.Decode(&servers); err != nil || len(servers) == 0 {
				t.Fatalf("paths.%s.servers: not a list of servers (%v)", path, err)
			}
			prefix = serverPath(t, servers[0].URL)
		}
		for key := range item {
			if slices.Contains(openAPIMethods, key) {
				ops[strings.ToUpper(key)+" "+prefix+path] = true
			}
		}
	}
	return ops
}

// registeredOperations returns "METHOD /full/path" for the gateway's
// routes, with Fiber parameters written as OpenAPI templates (:id -> {id}).
// Middleware (USE), implicit HEAD routes, OPTIONS/CONNECT/TRACE and
// wildcard catch-alls are not operations.
func registeredOperations(routes []fiber.Route) map[string]bool {
	ops := map[string]bool{}
	for _, r := range routes {
		if slices.Contains(skippedMethods, r.Method) || strings.ContainsAny(r.Path, "*+") {
			continue
		}
		path := fiberParam.ReplaceAllString(r.Path, "{$1}")
		if len(path) > 1 {
			path = strings.TrimSuffix(path, "/")
		}
		ops[r.Method+" "+path] = true
	}
	return ops
}

// danglingRefs lists every $ref of the document that is not a local
// pointer to an existing entry under #/components.
func danglingRefs(root *yaml.Node) []string {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	var problems []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "$ref" {
					if v.Kind != yaml.ScalarNode {
						problems = append(problems, fmt.Sprintf("line %d: $ref is not a string", v.Line))
					} else if !strings.HasPrefix(v.Value, "#/components/") {
						problems = append(problems, fmt.Sprintf("line %d: %s does not point into #/components", v.Line, v.Value))
					} else if resolvePointer(doc, v.Value) == nil {
						problems = append(problems, fmt.Sprintf("line %d: %s does not exist", v.Line, v.Value))
					}
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(doc)
	return problems
}

// resolvePointer follows a local JSON pointer ("#/components/schemas/Task")
// through mapping nodes; nil when an element is missing.
func resolvePointer(doc *yaml.Node, ref string) *yaml.Node {
	n := doc
	for _, seg := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "~1", "/"), "~0", "~")
		next := mappingValue(n, seg)
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// openAPIParameter is a parameter object or a $ref to one.
type openAPIParameter struct {
	Ref      string `yaml:"$ref"`
	Name     string `yaml:"name"`
	In       string `yaml:"in"`
	Required bool   `yaml:"required"`
}

// pathParameterProblems checks that every operation declares exactly the
// parameters of its path template as required path parameters (path-level
// and operation-level lists together, $refs resolved).
func (d *openAPIDoc) pathParameterProblems() []string {
	doc := &d.root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		doc = doc.Content[0]
	}
	var problems []string
	declared := func(node yaml.Node, where string) map[string]bool {
		var params []openAPIParameter
		if err := node.Decode(&params); err != nil {
			problems = append(problems, fmt.Sprintf("%s.parameters: %v", where, err))
			return nil
		}
		out := map[string]bool{}
		for _, p := range params {
			if p.Ref != "" {
				target := resolvePointer(doc, p.Ref)
				if target == nil {
					continue // reported by the $ref check
				}
				if err := target.Decode(&p); err != nil {
					problems = append(problems, fmt.Sprintf("%s: %s: %v", where, p.Ref, err))
					continue
				}
			}
			if p.In != "path" {
				continue
			}
			if !p.Required {
				problems = append(problems, fmt.Sprintf("%s: path parameter %q must be required", where, p.Name))
			}
			out[p.Name] = true
		}
		return out
	}
	paths := make([]string, 0, len(d.Paths))
	for p := range d.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, path := range paths {
		item := d.Paths[path]
		want := map[string]bool{}
		for _, m := range templateParam.FindAllStringSubmatch(path, -1) {
			want[m[1]] = true
		}
		common := map[string]bool{}
		if node, ok := item["parameters"]; ok {
			common = declared(node, path)
		}
		for _, method := range openAPIMethods {
			op, ok := item[method]
			if !ok {
				continue
			}
			where := strings.ToUpper(method) + " " + path
			have := map[string]bool{}
			for name := range common {
				have[name] = true
			}
			if node := mappingValue(&op, "parameters"); node != nil {
				for name := range declared(*node, where) {
					have[name] = true
				}
			}
			for name := range want {
				if !have[name] {
					problems = append(problems, fmt.Sprintf("%s: path parameter {%s} is not declared", where, name))
				}
			}
			for name := range have {
				if !want[name] {
					problems = append(problems, fmt.Sprintf("%s: declares path parameter %q that is not in the path", where, name))
				}
			}
		}
	}
	return problems
}
