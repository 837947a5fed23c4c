package agentry

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// forbiddenInCLI are packages a REST client has no use for: the database
// drivers and ORM, the Temporal SDK and server, and the gateway's own
// server-side rooms. The agentry binary reaches the gateway through
// internal/apiclient only (issue 41: it linked 667 packages and weighed
// 54 MB when it imported models through the old hand-written client).
var forbiddenInCLI = regexp.MustCompile(`gorm|sqlite|pgx|go\.temporal\.io|agentry/(models|workflows|activities|api|gateway|worker)(/|$)`)

// TestCLIImportsNoServerPackage enforces the import rule on the agentry
// binary: `go list -deps ./cmd/agentry` shows none of forbiddenInCLI. A new
// import that pulls one in names the package here; move what the CLI needs
// into a leaf package (as internal/agentdef, internal/signature and
// internal/toolgrant were).
func TestCLIImportsNoServerPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/agentryhq/agentry/cmd/agentry").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	var bad []string
	for _, pkg := range strings.Fields(string(out)) {
		if forbiddenInCLI.MatchString(pkg) {
			bad = append(bad, pkg)
		}
	}
	if len(bad) > 0 {
		t.Fatalf("cmd/agentry links %d server package(s); find the importer with `go list -deps -f '{{.ImportPath}}: {{.Imports}}' ./cmd/agentry`:\n%s",
			len(bad), strings.Join(bad, "\n"))
	}
}
