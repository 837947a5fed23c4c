package agentry

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"github.com/kardianos/service"
	"github.com/spf13/cobra"

	"github.com/agentryhq/agentry/internal/config"
)

// DaemonName is the service's name (agentry.service, a launchd label).
const DaemonName = "agentry"

// daemonUnit is the systemd unit kardianos/service renders (its template
// syntax: {{Key}} and {{range}}); renderDaemonUnit renders the same text
// for --dry-run. User units are wanted by default.target, system units by
// multi-user.target (the library's built-in unit says multi-user.target
// for both, which a user manager never reaches).
const daemonUnit = `[Unit]
Description={{Description}}
After=network-online.target

[Service]
ExecStart="{{Path}}"
WorkingDirectory="{{WorkingDirectory}}"
{{range EnvVars}}{{.}}
{{end}}Restart=on-failure
RestartSec=5
TimeoutStopSec=45

[Install]
WantedBy=%s
`

type daemonSpec struct {
	system    bool
	exe       string
	workspace string
	env       map[string]string
}

func (d daemonSpec) config() *service.Config {
	target := "default.target"
	if d.system {
		target = "multi-user.target"
	}
	return &service.Config{
		Name: DaemonName, DisplayName: "Agentry gateway", Description: "Agentry gateway (agentryd)",
		Executable: d.exe, WorkingDirectory: d.workspace, EnvVars: d.env,
		Option: service.KeyValue{"UserService": !d.system, "SystemdScript": fmt.Sprintf(daemonUnit, target), "KeepAlive": true, "RunAtLoad": true},
	}
}

// renderDaemonUnit is the unit install writes (systemd).
func renderDaemonUnit(d daemonSpec) string {
	c := d.config()
	unit := c.Option["SystemdScript"].(string)
	var env strings.Builder
	keys := make([]string, 0, len(d.env))
	for k := range d.env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&env, "Environment=%s=%s\n", k, d.env[k])
	}
	unit = strings.Replace(unit, "{{range EnvVars}}{{.}}\n{{end}}", env.String(), 1)
	return strings.NewReplacer("{{Description}}", c.Description, "{{Path}}", c.Executable, "{{WorkingDirectory}}", c.WorkingDirectory).Replace(unit)
}

// daemonProgram satisfies service.Interface; the CLI only controls the
// service, agentryd is what runs.
type daemonProgram struct{}

func (daemonProgram) Start(service.Service) error { return nil }
func (daemonProgram) Stop(service.Service) error  { return nil }

// errNoServiceManager explains a machine without systemd or launchd.
func errNoServiceManager(found string) error {
	return fmt.Errorf("no service manager to install the gateway with here (found %s; daemon needs systemd as PID 1 on Linux or launchd on macOS). "+
		"Run it in the foreground with `agentry server start` or under your own supervisor; `agentry daemon install --dry-run` prints the unit", found)
}

// userBusMissing reports why a systemd user manager cannot be reached.
func userBusMissing(getenv func(string) (string, bool)) string {
	dir, _ := getenv("XDG_RUNTIME_DIR")
	if dir == "" {
		dir = fmt.Sprintf("/run/user/%d", os.Getuid())
	}
	if _, err := os.Stat(filepath.Join(dir, "bus")); err != nil {
		return fmt.Sprintf("there is no user session bus (%s/bus)", dir)
	}
	return ""
}

func (a *App) daemonCommand() *cobra.Command {
	var system, dryRun bool
	spec := func() (daemonSpec, error) {
		ws, err := config.ResolveWorkspace(a.Env)
		if err != nil {
			return daemonSpec{}, err
		}
		exe, err := findDaemon()
		if err != nil {
			if !dryRun {
				return daemonSpec{}, err
			}
			exe = "/usr/local/bin/agentryd"
			fmt.Fprintln(a.Stderr, "agentry: agentryd is neither beside agentry nor in PATH; the unit names "+exe)
		}
		if abs, err := filepath.Abs(exe); err == nil {
			exe = abs
		}
		env := map[string]string{config.EnvWorkspace: ws.Root}
		if p, ok := a.Env(config.EnvConfigPath); ok && p != "" {
			env[config.EnvConfigPath] = p
		}
		return daemonSpec{system: system, exe: exe, workspace: ws.Root, env: env}, nil
	}
	open := func() (service.Service, daemonSpec, error) {
		sys := service.ChosenSystem()
		found := "none"
		if sys != nil {
			found = sys.String()
		}
		if sys == nil || (found != "linux-systemd" && found != "darwin-launchd") {
			return nil, daemonSpec{}, errNoServiceManager(found)
		}
		d, err := spec()
		if err != nil {
			return nil, d, err
		}
		if found == "linux-systemd" && !system {
			if why := userBusMissing(a.Env); why != "" {
				return nil, d, fmt.Errorf("cannot reach your systemd user manager: %s (a headless server without a login session). "+
					"Either enable lingering (`loginctl enable-linger %s`, then log in again or set XDG_RUNTIME_DIR=/run/user/%d) or install a system unit with `agentry daemon install --system` (as root)",
					why, os.Getenv("USER"), os.Getuid())
			}
		}
		s, err := service.New(daemonProgram{}, d.config())
		return s, d, err
	}
	report := func(action string, d daemonSpec, extra map[string]any) error {
		scope := "user"
		if d.system {
			scope = "system"
		}
		if a.jsonOut {
			v := map[string]any{"service": DaemonName, "scope": scope, "action": action}
			for k, x := range extra {
				v[k] = x
			}
			return printValue(a.Stdout, v)
		}
		fmt.Fprintf(a.Stdout, "%s service %s: %s.\n", scope, DaemonName, action)
		return nil
	}
	install := &cobra.Command{
		Use:   "install [--system] [--dry-run]",
		Short: "Install the gateway as a service (systemd user unit; --system: a system unit; launchd on macOS)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun {
				d, err := spec()
				if err != nil {
					return err
				}
				if runtime.GOOS == "darwin" {
					fmt.Fprintln(a.Stderr, "agentry: macOS installs a launchd job rendered by kardianos/service; the systemd unit of Linux follows")
				}
				unit := renderDaemonUnit(d)
				if a.jsonOut {
					return printValue(a.Stdout, map[string]any{"service": DaemonName, "system": system, "unit": unit})
				}
				fmt.Fprint(a.Stdout, unit)
				return nil
			}
			s, d, err := open()
			if err != nil {
				return err
			}
			if err := s.Install(); err != nil {
				s.Uninstall() // nothing half-installed
				return fmt.Errorf("install the %s service: %w", DaemonName, err)
			}
			return report("installed (start it with `agentry daemon start`)", d, nil)
		},
	}
	control := func(name, short string, act func(service.Service) error, done string) *cobra.Command {
		return &cobra.Command{
			Use: name + " [--system]", Short: short, Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, d, err := open()
				if err != nil {
					return err
				}
				if err := act(s); err != nil {
					return fmt.Errorf("%s the %s service: %w", name, DaemonName, err)
				}
				return report(done, d, nil)
			},
		}
	}
	start := control("start", "Start the installed service", func(s service.Service) error { return s.Start() }, "started")
	stop := control("stop", "Stop the service", func(s service.Service) error { return s.Stop() }, "stopped")
	uninstall := control("uninstall", "Remove the service (the workspace is left as it is)", func(s service.Service) error {
		_ = s.Stop()
		return s.Uninstall()
	}, "uninstalled (the workspace is untouched)")
	status := &cobra.Command{
		Use: "status [--system]", Short: "Whether the service is installed and running", Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, d, err := open()
			if err != nil {
				return err
			}
			st, err := s.Status()
			state := map[service.Status]string{service.StatusRunning: "running", service.StatusStopped: "stopped"}[st]
			if errors.Is(err, service.ErrNotInstalled) {
				state, err = "not installed", nil
			}
			if err != nil {
				return fmt.Errorf("status of the %s service: %w", DaemonName, err)
			}
			if state == "" {
				state = "unknown"
			}
			return report(state, d, map[string]any{"status": state})
		},
	}
	g := group("daemon", "Run the gateway as a service (systemd, launchd)", install, start, stop, status, uninstall)
	g.Annotations = map[string]string{AnnotationHostChanging: "unless-dry-run"}
	g.PersistentFlags().BoolVar(&system, "system", false, "a system unit (root) instead of a user unit")
	install.Flags().BoolVar(&dryRun, "dry-run", false, "print the unit instead of installing it")
	return g
}
