// Command mcpserver runs the development MCP server (see package
// dev/mcpserver) over stdio (default) or streamable HTTP (-http addr).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentryhq/agentry/dev/mcpserver"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address (host:port) instead of stdio")
	callLog := flag.String("call-log", os.Getenv("MCPSERVER_CALL_LOG"), "file that the slow tool appends start/done lines to")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := mcpserver.New(mcpserver.Options{CallLog: *callLog})
	var err error
	if *addr == "" {
		err = mcpserver.RunStdio(ctx, s)
	} else {
		srv := &http.Server{Addr: *addr, Handler: mcpserver.Handler(s)}
		go func() { <-ctx.Done(); _ = srv.Close() }()
		fmt.Fprintf(os.Stderr, "mcpserver: streamable HTTP on %s\n", *addr)
		if err = srv.ListenAndServe(); err == http.ErrServerClosed {
			err = nil
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpserver:", err)
		os.Exit(1)
	}
}
