package netguard

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
)

// Git runs git for fetches made on someone else's behalf (package and
// skill installs) so that it cannot reach what the policy refuses:
//
//   - every HTTP(S) connection goes through a Proxy on the policy's dialer
//     (http.proxy given on the command line, which outranks any config
//     file; no config file is read anyway: GIT_CONFIG_NOSYSTEM,
//     GIT_CONFIG_GLOBAL=/dev/null, HOME a fresh folder), redirects
//     included, each one a new request through the proxy;
//   - the environment is rebuilt from nothing, so http_proxy, NO_PROXY,
//     GIT_SSH, GIT_PROXY_COMMAND and the like cannot route around it;
//   - only the transports allowed here run (protocol.allow=never):
//     https, http when AllowHTTP, file when AllowFile, and ssh only to a
//     host the policy names in allowed_hosts (ssh and git:// dial
//     themselves, so no other host may be reached through them).
type Git struct {
	Policy Policy
	// AllowHTTP lets plain http:// sources through (checked like https).
	AllowHTTP bool
	// AllowFile lets file:// sources through (callers decide who may).
	AllowFile bool
	// Home is the folder git gets as HOME (empty: a temporary one).
	Home string
}

// scpLike is git's [user@]host:path form (ssh): as git reads it, a colon
// before any slash.
var scpLike = regexp.MustCompile(`^(?:[^@/:]+@)?(\[[^\]/]+\]|[^/:@\[]+):`)

// CheckSource says whether a git source may be fetched under the policy,
// before anything is dialed: the scheme must be allowed, a literal
// address must pass, and ssh or git:// must name an allowed host (their
// connections do not go through the proxy). Names are checked again at
// dial time by the proxy.
func (g Git) CheckSource(src string) error {
	scheme, host := gitSchemeHost(src)
	switch scheme {
	case "https":
	case "http":
		if !g.AllowHTTP {
			return fmt.Errorf("%s: only https git URLs are fetched here", src)
		}
	case "file":
		if !g.AllowFile {
			return fmt.Errorf("refused by the SSRF policy (%s): file:// sources are for clients on the gateway host", PolicyName)
		}
		return nil
	case "ssh", "git", "git+ssh", "ssh+git":
		if g.Policy.Enabled && !g.Policy.hostAllowed(host) {
			return &BlockedError{Host: host, IP: ParseIP(host), Reason: scheme + " connections do not pass the fetch proxy; list the host in " + PolicyName + ".allowed_hosts to allow them"}
		}
	default:
		return fmt.Errorf("%s: the %q transport is not allowed", src, scheme)
	}
	return g.Policy.CheckHost(host)
}

// gitSchemeHost reads a git source's transport and host (scp-like
// user@host:path is ssh).
func gitSchemeHost(src string) (scheme, host string) {
	if strings.Contains(src, "://") {
		u, err := url.Parse(src)
		if err != nil {
			return "invalid", ""
		}
		return strings.ToLower(u.Scheme), u.Hostname()
	}
	if m := scpLike.FindStringSubmatch(src); m != nil {
		return "ssh", strings.Trim(m[1], "[]")
	}
	return "file", "" // a plain path
}

// Command prepares git with args behind a fresh proxy. Run it, then call
// done (which stops the proxy); Refusal tells whether the policy refused
// a connection the command tried, the reason to report when it failed.
func (g Git) Command(ctx context.Context, dir string, args ...string) (cmd *exec.Cmd, proxy *Proxy, done func(), err error) {
	home := g.Home
	var cleanup func()
	if home == "" {
		if home, err = os.MkdirTemp("", "agentry-git-home-"); err != nil {
			return nil, nil, nil, err
		}
		h := home
		cleanup = func() { os.RemoveAll(h) }
	}
	proxy, err = g.Policy.StartProxy(g.AllowHTTP)
	if err != nil {
		if cleanup != nil {
			cleanup()
		}
		return nil, nil, nil, err
	}
	conf := []string{"protocol.allow=never", "protocol.https.allow=always",
		"http.proxy=" + proxy.URL(), "http.followRedirects=initial",
		"core.gitProxy=", "core.sshCommand=ssh -o BatchMode=yes", "credential.helper=", "submodule.recurse=false"}
	if g.AllowHTTP {
		conf = append(conf, "protocol.http.allow=always")
	}
	if g.AllowFile {
		conf = append(conf, "protocol.file.allow=always")
	}
	if !g.Policy.Enabled || len(g.Policy.AllowedHosts) > 0 {
		// ssh connects on its own; CheckSource admits it only for an
		// allowed host (or with the policy off).
		conf = append(conf, "protocol.ssh.allow=always", "protocol.git.allow=always")
	}
	full := make([]string, 0, 2*len(conf)+len(args))
	for _, c := range conf {
		full = append(full, "-c", c)
	}
	cmd = exec.CommandContext(ctx, "git", append(full, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LANG=C", "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=true",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_PROTOCOL_FROM_USER=0"}
	done = func() {
		proxy.Close()
		if cleanup != nil {
			cleanup()
		}
	}
	return cmd, proxy, done, nil
}
