// Command probe checks an agentryd binary from the outside (issue 18): bad
// input against every route family, planted secrets echoed by a provider,
// SIGKILL while work is in flight. It prints a table (or JSON with -json)
// and exits 1 when a figure that must be 0 is not. See docs/probe.md.
//
//	go build -o bin/agentryd ./cmd/agentryd
//	go run ./dev/cmd/probe -binary bin/agentryd -requests 5000 -kills 10
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/agentryhq/agentry/dev/probe"
)

func main() {
	var opts probe.Options
	flag.StringVar(&opts.Binary, "binary", "bin/agentryd", "the agentryd binary to probe")
	flag.IntVar(&opts.Requests, "requests", 5000, "bad requests to send")
	flag.IntVar(&opts.Kills, "kills", 10, "SIGKILLs while work is in flight (0 skips them)")
	flag.Uint64Var(&opts.Seed, "seed", 18, "seed of the requests, kill moments and planted values")
	flag.DurationVar(&opts.Timeout, "timeout", 10*time.Second, "an answer slower than this counts as a hang")
	flag.IntVar(&opts.Workers, "workers", 4, "concurrent bad requests")
	asJSON := flag.Bool("json", false, "print the report as JSON")
	flag.Parse()
	if _, err := os.Stat(opts.Binary); err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v (build it: make build)\n", err)
		os.Exit(2)
	}
	opts.Log = os.Stderr
	rep, err := probe.Run(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "probe: %v\n", err)
		os.Exit(2)
	}
	if *asJSON {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		rep.WriteTable(os.Stdout)
	}
	if !rep.OK() {
		os.Exit(1)
	}
}
