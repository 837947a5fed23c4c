package ssh_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/sandboxtest"
	sshexec "github.com/agentryhq/agentry/internal/sandbox/ssh"
)

type server struct {
	addr, keyFile, hostKey string
}

// startSSHD runs a real sshd on loopback for the test: its own host key,
// one authorized client key, nothing else.
func startSSHD(t *testing.T) server {
	t.Helper()
	sshd, err := exec.LookPath("sshd")
	if err != nil {
		if _, e := os.Stat("/usr/sbin/sshd"); e == nil {
			sshd = "/usr/sbin/sshd"
		} else {
			t.Fatal("sshd not installed (apt-get install openssh-server; dev/provision.sh)")
		}
	}
	dir := t.TempDir()
	writeKey := func(name string) ssh.PublicKey {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		blk, err := ssh.MarshalPrivateKey(priv, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(blk), 0o600); err != nil {
			t.Fatal(err)
		}
		sp, _ := ssh.NewPublicKey(pub)
		return sp
	}
	hostPub := writeKey("host_key")
	clientPub := writeKey("client_key")
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	conf := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s/host_key
AuthorizedKeysFile %s/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PidFile %s/sshd.pid
`, port, dir, dir, dir)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.MkdirAll("/run/sshd", 0o755)
	cmd := exec.Command(sshd, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if i > 100 {
			t.Fatalf("sshd did not listen: %s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	user := os.Getenv("USER")
	if user == "" {
		user = "root"
	}
	_ = user
	return server{addr: addr, keyFile: filepath.Join(dir, "client_key"), hostKey: strings.TrimSpace(string(ssh.MarshalAuthorizedKey(hostPub)))}
}

func newExec(t *testing.T, s server, caps sandbox.Caps) *sshexec.Executor {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	py, _ := exec.LookPath("python3")
	e, err := sshexec.New(ctx, sshexec.Config{Address: s.addr, User: "root", KeyFile: s.keyFile, HostKey: s.hostKey,
		PythonPath: py, Caps: caps, Tools: []string{"ls"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

func runner(e sandbox.Executor) sandboxtest.Runner {
	return func(ctx context.Context, code, dir string, caps sandbox.Caps) (sandbox.Result, error) {
		return e.Run(ctx, sandbox.Request{Code: code, Dir: dir, Caps: caps})
	}
}

func TestSSHEscapeSuite(t *testing.T) {
	s := startSSHD(t)
	sandboxtest.Escape(t, runner(newExec(t, s, sandbox.Caps{})))
}

func TestSSHOrdinaryCode(t *testing.T) {
	s := startSSHD(t)
	sandboxtest.Ordinary(t, runner(newExec(t, s, sandbox.Caps{})))
}

func TestSSHHostKeyPinned(t *testing.T) {
	s := startSSHD(t)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	sp, _ := ssh.NewPublicKey(other.Public())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := sshexec.New(ctx, sshexec.Config{Address: s.addr, User: "root", KeyFile: s.keyFile, HostKey: string(ssh.MarshalAuthorizedKey(sp))})
	if !errors.Is(err, sandbox.ErrUnavailable) || !strings.Contains(err.Error(), "host key") {
		t.Fatalf("want a host key mismatch, got %v", err)
	}
	_, err = sshexec.New(ctx, sshexec.Config{Address: "127.0.0.1:1", User: "root", KeyFile: s.keyFile, HostKey: s.hostKey})
	if !errors.Is(err, sandbox.ErrUnavailable) {
		t.Fatalf("want unreachable, got %v", err)
	}
}

// TestSSHFigures: print(1) over ssh to a real sshd on loopback
// (docs/benchmarks.md). AGENTRY_SANDBOX_BENCH=1.
func TestSSHFigures(t *testing.T) {
	if os.Getenv("AGENTRY_SANDBOX_BENCH") == "" {
		t.Skip("set AGENTRY_SANDBOX_BENCH=1")
	}
	s := startSSHD(t)
	ctx := context.Background()
	py := os.Getenv("AGENTRY_SANDBOX_BENCH_PYTHON")
	if py == "" {
		py, _ = exec.LookPath("python3")
	}
	e, err := sshexec.New(ctx, sshexec.Config{Address: s.addr, User: "root", KeyFile: s.keyFile, HostKey: s.hostKey, PythonPath: py})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	var lat []time.Duration
	for range 20 {
		start := time.Now()
		res, err := e.Run(ctx, sandbox.Request{Code: "print(1)", Dir: t.TempDir()})
		if err != nil || strings.TrimSpace(res.Stdout) != "1" {
			t.Fatalf("%+v %v", res, err)
		}
		lat = append(lat, time.Since(start))
	}
	sortDur(lat)
	t.Logf("ssh (%s): print(1) p50 %s p99 %s over %d calls", py, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), len(lat))
	const conc, total = 8, 24
	jobs := make(chan struct{}, total)
	for range total {
		jobs <- struct{}{}
	}
	close(jobs)
	done := make(chan struct{})
	start := time.Now()
	for range conc {
		go func() {
			for range jobs {
				if _, err := e.Run(ctx, sandbox.Request{Code: "print(1)", Dir: t.TempDir()}); err != nil {
					t.Error(err)
				}
			}
			done <- struct{}{}
		}()
	}
	for range conc {
		<-done
	}
	t.Logf("ssh: %.1f executions/s with 8 concurrent", float64(total)/time.Since(start).Seconds())
}

func sortDur(d []time.Duration) {
	for i := range d {
		for j := i + 1; j < len(d); j++ {
			if d[j] < d[i] {
				d[i], d[j] = d[j], d[i]
			}
		}
	}
}
