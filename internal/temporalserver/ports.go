package temporalserver

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"
)

// envVarName is the environment variable that overrides a config key, by the
// gateway's rule: AGENTRY_ + key path with dots as underscores, upper case.
func envVarName(configKey string) string {
	return "AGENTRY_" + strings.ToUpper(strings.ReplaceAll(configKey, ".", "_"))
}

// listen binds host:port ("port 0" picks a free one). A busy port comes back
// as *PortInUseError naming configKey.
func listen(host string, port int, configKey string) (net.Listener, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return nil, &PortInUseError{Addr: addr, ConfigKey: configKey}
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return ln, nil
}

// reservePorts returns n distinct free ports on host. Temporal binds the
// ports itself, so they are released again before it starts; holding them
// all at once until then keeps them distinct, and the kernel hands out
// ephemeral ports spread enough that parallel servers rarely collide.
// pickPorts is reservePorts (tests replace it to make a collision).
var pickPorts = reservePorts

// pickedPortTaken tells whether err is Temporal failing to bind one of
// the ports Start picked (not the frontend port the configuration named).
func pickedPortTaken(err error, p servicePorts, configuredFrontend int) bool {
	msg := err.Error()
	if !strings.Contains(msg, "address already in use") {
		return false
	}
	picked := []int{p.frontendHTTP, p.history, p.matching, p.worker}
	if configuredFrontend == 0 {
		picked = append(picked, p.frontend)
	}
	for _, port := range picked {
		if strings.Contains(msg, ":"+strconv.Itoa(port)+":") {
			return true
		}
	}
	return false
}

func reservePorts(host string, n int) ([]int, error) {
	listeners := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return nil, fmt.Errorf("pick a free port on %s: %w", host, err)
		}
		listeners = append(listeners, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// checkPortFree fails with *PortInUseError if host:port cannot be bound now.
// For a port Temporal binds itself, this turns the common case of a busy
// port into a clear error instead of the server's fatal log.
func checkPortFree(host string, port int, configKey string) error {
	ln, err := listen(host, port, configKey)
	if err != nil {
		return err
	}
	return ln.Close()
}
