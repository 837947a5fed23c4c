// Command agentry is the command-line client of an Agentry gateway.
package main

import (
	"os"

	"github.com/agentryhq/agentry/cli/agentry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(agentry.Execute(version)) }
