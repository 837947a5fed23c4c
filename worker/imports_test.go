package worker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Production code imports nothing from dev/ (test fakes, harnesses, load
// tools). `go list` without -test reports what each package links into a
// binary (.Deps is transitive), so imports in _test.go files are fine;
// packages under dev/ and the e2e tests may use dev/.
func TestProductionImportsNothingFromDev(t *testing.T) {
	const module = "github.com/agentryhq/agentry"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg := f[0]
		if strings.HasPrefix(pkg, module+"/dev/") || pkg == module+"/e2e" {
			continue
		}
		checked++
		for _, d := range f[1:] {
			if strings.HasPrefix(d, module+"/dev/") {
				t.Errorf("%s depends on %s: production code must not import dev/", pkg, d)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d production packages listed; is go list working?", checked)
	}
}
