// Command fake-telegram runs the fake Telegram Bot API (getUpdates,
// setWebhook, sendMessage ...) for trying a Telegram channel without
// Telegram:
//
//	go run ./dev/cmd/fake-telegram --addr 127.0.0.1:8081
//
// Point channels.telegram.api_base_url at it with the bot token it prints.
// A person "writes" to the bot with POST /_fake/message and what the bot
// sent is GET /_fake/sent (dev/faketelegram/control.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentryhq/agentry/dev/faketelegram"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	flag.Parse()
	srv, err := faketelegram.Listen(*addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake-telegram:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "fake Telegram Bot API on %s (bot token %s)\n", srv.URL(), faketelegram.DefaultToken)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Close()
}
