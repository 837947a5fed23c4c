// Command agentryd runs the Agentry gateway.
package main

import (
	"os"

	"github.com/agentryhq/agentry/cli/agentryd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(agentryd.Execute(version)) }
