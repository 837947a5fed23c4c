package gateway

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"gopkg.in/yaml.v3"

	"github.com/agentryhq/agentry/api"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/logbuf"
	"github.com/agentryhq/agentry/internal/scrub"
	"github.com/agentryhq/agentry/worker"
)

// testServices builds the services the way Start does, from the embedded
// defaults and a temporary workspace, with no Temporal server: the client
// is lazy (it dials on first use), so only the background loops, which
// log and retry, notice that nothing answers.
func testServices(t *testing.T) *Services {
	t.Helper()
	return testServicesEnv(t, nil)
}

// testServicesEnv is testServices with extra environment (AGENTRY_*).
func testServicesEnv(t *testing.T, extra map[string]string) *Services {
	t.Helper()
	s, err := tryServicesEnv(t, extra)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// tryServicesEnv is testServicesEnv returning NewServices's error.
func tryServicesEnv(t *testing.T, extra map[string]string) (*Services, error) {
	t.Helper()
	ctx := context.Background()
	env := map[string]string{config.EnvWorkspace: t.TempDir()}
	for k, v := range extra {
		env[k] = v
	}
	cfg, err := config.Load(ctx, config.MapEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Workspace.Ensure(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	g := &Gateway{Config: cfg, log: log, Logs: logbuf.New(10), secrets: scrub.Register("gateway-test")}
	t.Cleanup(g.secrets.Close)
	if g.Store, err = OpenStore(ctx, cfg, log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Store.Close() })
	g.Temporal, err = client.NewLazyClient(client.Options{HostPort: "127.0.0.1:1", Logger: sdklog.NewStructuredLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Temporal.Close)
	s, err := NewServices(ctx, g, log)
	if err != nil {
		return nil, err
	}
	t.Cleanup(s.Stop)
	return s, nil
}

// Every service the gateway offers is built from a default configuration.
func TestServicesBuildFromTheDefaultConfig(t *testing.T) {
	s := testServices(t)
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.IsExported() && f.Type.Kind() == reflect.Pointer && v.Field(i).IsNil() {
			t.Errorf("Services.%s is not built", f.Name)
		}
	}
	if s.Worker() == nil {
		t.Fatal("no worker")
	}
}

// Every route group of the api package (each type with a Register
// method, named ...Feature) is handed to the API server.
func TestEveryAPIFeatureIsWired(t *testing.T) {
	s := testServices(t)
	var wired []string
	// The OpenAI-compatible endpoint (/v1) and the MCP server (/mcp) are
	// mounted apart (api.Deps.OpenAI, MCPServer): their own authenticated groups.
	for _, f := range append(s.Features(), append(s.PublicFeatures(), s.OpenAIFeature(), s.MCPServerFeature("test"))...) {
		wired = append(wired, reflect.TypeOf(f).Elem().Name())
	}
	for _, name := range apiFeatureTypes(t) {
		if !slices.Contains(wired, name) {
			t.Errorf("api.%s is not in Services.Features or PublicFeatures: its routes are not served", name)
		}
	}
}

// apiFeatureTypes are the api package's types named ...Feature that have
// a Register method.
func apiFeatureTypes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../api/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || fd.Name.Name != "Register" || len(fd.Recv.List) != 1 {
				continue
			}
			typ := fd.Recv.List[0].Type
			if st, ok := typ.(*ast.StarExpr); ok {
				typ = st.X
			}
			if id, ok := typ.(*ast.Ident); ok && strings.HasSuffix(id.Name, "Feature") {
				names = append(names, id.Name)
			}
		}
	}
	if len(names) < 15 {
		t.Fatalf("found only %d api features; is the parse right?", len(names))
	}
	return names
}

// Every route group of docs/openapi.yaml (the first segment of its paths
// under /api/v1) is served by the API built from the gateway's features,
// and no other.
func TestEveryRouteGroupIsServed(t *testing.T) {
	s := testServices(t)
	srv := api.New(api.Deps{Config: s.gw.Config, Logger: s.log, Features: s.Features()})
	served := map[string]bool{}
	for _, r := range srv.App().GetRoutes(true) {
		if rest, ok := strings.CutPrefix(r.Path, api.Prefix+"/"); ok && r.Method != "USE" {
			served[strings.SplitN(rest, "/", 2)[0]] = true
		}
	}
	body, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]struct {
			Servers []any `yaml:"servers"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, item := range doc.Paths {
		if len(item.Servers) == 0 { // under the /api/v1 server
			documented[strings.SplitN(strings.TrimPrefix(p, "/"), "/", 2)[0]] = true
		}
	}
	for g := range documented {
		if !served[g] {
			t.Errorf("route group /%s of docs/openapi.yaml is not served", g)
		}
	}
	for g := range served {
		if !documented[g] {
			t.Errorf("route group /%s is served but not in docs/openapi.yaml", g)
		}
	}
}

// The worker the gateway runs (in-process and as `agentryd worker`)
// registers every workflow and every activity, built from dependencies
// that are all set.
func TestEveryWorkflowAndActivityIsOnTheWorker(t *testing.T) {
	s := testServices(t)
	got := worker.Registered(s.Worker())
	all := worker.Registered(worker.Build(worker.Deps{}))
	if !slices.Equal(got.Activities, all.Activities) || !slices.Equal(got.Workflows, all.Workflows) {
		t.Fatalf("the gateway's worker registers\n%v\n%v\nwant\n%v\n%v", got.Workflows, got.Activities, all.Workflows, all.Activities)
	}
	for _, wf := range worker.Workflows {
		if !slices.Contains(got.Workflows, wf.Name) {
			t.Errorf("workflow %s is not registered", wf.Name)
		}
	}
	deps := s.workerDeps()
	v := reflect.ValueOf(deps)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Errorf("worker.Deps.%s is not set by the gateway", v.Type().Field(i).Name)
		}
	}
	for _, a := range worker.Activities(deps) {
		sv := reflect.ValueOf(a).Elem()
		for i := range sv.NumField() {
			f := sv.Field(i)
			switch f.Kind() {
			case reflect.Pointer, reflect.Interface:
				if f.IsNil() {
					t.Errorf("%s.%s is nil: the activity would fail at run time", sv.Type().Name(), sv.Type().Field(i).Name)
				}
			}
		}
	}
}
