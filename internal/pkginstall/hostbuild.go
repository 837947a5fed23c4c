package pkginstall

import (
	"fmt"
	"strings"

	"github.com/agentryhq/agentry/internal/fault"
)

// ErrHostBuildNotApproved marks a host build the deployment's policy does
// not allow for the source (the API answers 403).
var ErrHostBuildNotApproved = &fault.Error{Kind: fault.KindForbidden, Code: "host_build_not_approved", Field: "allow_host_build",
	Msg: "host build not approved"}

// HostBuildPolicy is which sources may be built on the gateway host
// (package_installs.host_build_catalog, server.edition). In the personal
// edition any source may be built (with --allow-host-build from an admin)
// unless a catalog is set; team and scale editions build only sources of
// the catalog, and none without one: a host build runs the source's code
// on a machine a whole team depends on.
type HostBuildPolicy struct {
	Edition string
	// Catalog entries are exact source URLs, or prefixes ending in "/"
	// ("https://git.example.com/agents/" approves every repository there).
	Catalog []string
}

// restricted reports whether only catalog sources may be built.
func (p HostBuildPolicy) restricted() bool {
	return len(p.Catalog) > 0 || (p.Edition != "" && p.Edition != "personal")
}

// Allows is nil when source may be built on the gateway host, else an
// ErrHostBuildNotApproved naming why.
func (p HostBuildPolicy) Allows(source string) error {
	if !p.restricted() {
		return nil
	}
	for _, entry := range p.Catalog {
		entry = strings.TrimSpace(entry)
		if entry == source || (strings.HasSuffix(entry, "/") && strings.HasPrefix(source, entry)) {
			return nil
		}
	}
	if len(p.Catalog) == 0 {
		return fmt.Errorf("%w: the %s edition builds only sources of package_installs.host_build_catalog, and none is configured", ErrHostBuildNotApproved, p.Edition)
	}
	return fmt.Errorf("%w: %s is not in package_installs.host_build_catalog (%d entries)", ErrHostBuildNotApproved, source, len(p.Catalog))
}
