package worker_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/testsuite"

	"github.com/agentryhq/agentry/worker"
)

// contractActivities are the activity names the workflows' contracts
// declare: every string constant named Activity... in workflows/.
func contractActivities(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("../workflows/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, id := range vs.Names {
				if !strings.HasPrefix(id.Name, "Activity") || i >= len(vs.Values) {
					continue
				}
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					v, _ := strconv.Unquote(lit.Value)
					names = append(names, v)
				}
			}
			return true
		})
	}
	if len(names) < 20 {
		t.Fatalf("found only %d activity names in the workflows' contracts; is the parse right?", len(names))
	}
	return names
}

// Every activity a contract names is registered by the worker built from
// Deps, under that name, once.
func TestEveryContractActivityIsRegistered(t *testing.T) {
	got := worker.Registered(worker.Build(worker.Deps{}))
	for _, n := range contractActivities(t) {
		if !slices.Contains(got.Activities, n) {
			t.Errorf("the contract names activity %s; no activity struct built in worker.Activities has that method", n)
		}
	}
	for i := 1; i < len(got.Activities); i++ {
		if got.Activities[i] == got.Activities[i-1] {
			t.Errorf("activity %s is registered twice", got.Activities[i])
		}
	}
	for _, wf := range worker.Workflows {
		if !slices.Contains(got.Workflows, wf.Name) {
			t.Errorf("workflow %s is not registered", wf.Name)
		}
	}
}

// The SDK accepts every registration (it panics on a struct method that
// is not a valid activity, or a name registered twice).
func TestTheSDKAcceptsTheRegistrations(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	worker.Build(worker.Deps{}).Register(env)
}
