package gateway

import (
	"net"
	"strings"
	"testing"

	"github.com/agentryhq/agentry/internal/config"
)

// Issue 43: the start-up line (agentryd prints URL()) and the "gateway
// listening" log say https:// when the listener serves TLS.
func TestURLSaysHTTPSWhenTLSIsOn(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfg := &config.Loaded{Config: config.Defaults()}
	g := &Gateway{Config: cfg, ln: ln}
	if got := g.URL(); got != "http://"+ln.Addr().String() {
		t.Errorf("without TLS: %s", got)
	}
	cfg.Server.TLS = config.TLSConfig{Enabled: true, CertFile: "c.pem", KeyFile: "k.pem"}
	if got := g.URL(); !strings.HasPrefix(got, "https://") || !strings.HasSuffix(got, ln.Addr().String()) {
		t.Errorf("with TLS: %s, want https://%s", got, ln.Addr())
	}
}
