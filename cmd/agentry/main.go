// Command agentry is the command-line client of an Agentry gateway.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "agentry: the command-line client is not built yet")
	os.Exit(1)
}
