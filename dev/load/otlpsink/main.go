// Command otlpsink is an OTLP/HTTP receiver that reads every export and
// discards it: the collector of dev/load/chat-tracing.sh, so the figure is
// the gateway's cost of tracing and not a collector's decoding (a real
// collector runs elsewhere). It prints the number of exports and bytes
// received when stopped.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:4318", "listen address")
	flag.Parse()
	var exports, bytes atomic.Int64
	http.HandleFunc("/v1/traces", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		exports.Add(1)
		bytes.Add(n)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})
	go func() {
		if err := http.ListenAndServe(*addr, nil); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}()
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	<-stop
	fmt.Printf("exports=%d bytes=%d\n", exports.Load(), bytes.Load())
}
