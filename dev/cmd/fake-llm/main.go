// Command fake-llm runs the scripted fake LLM provider (OpenAI, Anthropic
// and Ollama wire formats) for trying the gateway without a model:
//
//	go run ./dev/cmd/fake-llm --addr 127.0.0.1:11434
//
// It lives under dev/ (not as an agentryd subcommand) so that the
// production binary links no test fakes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentryhq/agentry/dev/fakellm"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:11434", "listen address (the default is Ollama's, so a fresh gateway talks to it)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "fake LLM provider on http://%s\n", *addr)
	if err := fakellm.Run(ctx, *addr, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		fmt.Fprintln(os.Stderr, "fake-llm:", err)
		os.Exit(1)
	}
}
