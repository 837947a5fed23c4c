// Command fake-vault runs the fake Vault transit engine (dev/fakevault)
// for trying credentials.provider: hashivault without a Vault:
//
//	go run ./dev/cmd/fake-vault --addr 127.0.0.1:8200 --token dev-token
//
// Then point the gateway at it (docs/credentials.md):
//
//	credentials: {provider: hashivault, key_url: "hashivault://agentry", vault_address: "http://127.0.0.1:8200"}
//
// with VAULT_TOKEN=dev-token in the gateway's environment. Its keys live in
// memory: stopping it loses them (and every secret they wrapped).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentryhq/agentry/dev/fakevault"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8200", "listen address")
	token := flag.String("token", fakevault.DefaultToken, "the token it accepts (X-Vault-Token)")
	flag.Parse()
	srv, err := fakevault.Listen(*addr, *token)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake-vault:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "fake Vault transit engine on %s\n", srv.URL())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	<-ctx.Done()
	srv.Close()
}
