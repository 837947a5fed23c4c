// Package agentry holds files that ship inside the binaries, such as the
// defaults of the embedded Temporal server. It imports nothing heavy so any
// package may use it.
package agentry

import _ "embed"

// TemporalYAML is temporal.yaml from the repository root: the defaults of the
// embedded Temporal server (namespace, retention, ports, search attributes,
// dynamic config). Parse it with internal/temporalserver/temporaldefaults.
//
//go:embed temporal.yaml
var TemporalYAML []byte
