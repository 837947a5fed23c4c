package agentry

import (
	"context"
	"strings"
	"testing"

	"github.com/kardianos/service"
)

// What this machine can show: the units --dry-run prints (user and
// system), and the refusal where no service manager runs (no systemd as
// PID 1 here). Installing and starting a real unit needs a running
// systemd, which the test machines do not have.
func TestDaemonInstallDryRunPrintsTheUnit(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"daemon", "install", "--dry-run"}, "WantedBy=default.target"},
		{[]string{"daemon", "install", "--dry-run", "--system"}, "WantedBy=multi-user.target"},
	} {
		home := t.TempDir()
		a, out, errb := onboardApp(home)
		if code := a.Run(context.Background(), tc.args); code != 0 {
			t.Fatalf("%v: exit %d %s %s", tc.args, code, out, errb)
		}
		unit := out.String()
		for _, w := range []string{"[Unit]", "Description=Agentry gateway (agentryd)", `ExecStart="/`, "agentryd\"",
			`WorkingDirectory="` + home + `/.agentry"`, "Environment=AGENTRY_WORKSPACE=" + home + "/.agentry", "Restart=on-failure", tc.want} {
			if !strings.Contains(unit, w) {
				t.Errorf("%v: the unit lacks %q:\n%s", tc.args, w, unit)
			}
		}
	}
}

func TestDaemonWithoutAServiceManagerSaysWhatToDo(t *testing.T) {
	if sys := service.ChosenSystem(); sys != nil && (sys.String() == "linux-systemd" || sys.String() == "darwin-launchd") {
		t.Skipf("this machine has a service manager (%s)", sys)
	}
	for _, args := range [][]string{{"daemon", "install"}, {"daemon", "status"}, {"daemon", "start"}, {"daemon", "uninstall"}} {
		a, out, errb := onboardApp(t.TempDir())
		code := a.Run(context.Background(), args)
		if code == 0 || !strings.Contains(errb.String(), "no service manager") || !strings.Contains(errb.String(), "agentry server start") {
			t.Errorf("%v: exit %d, %s%s", args, code, out, errb)
		}
	}
}

func TestDaemonRefusedForRemoteTargets(t *testing.T) {
	a, out, errb := onboardApp(t.TempDir())
	code := a.Run(context.Background(), []string{"daemon", "install", "--gateway", "http://gw.example:18789"})
	if code == 0 || !strings.Contains(errb.String(), "is remote") {
		t.Fatalf("exit %d, %s%s", code, out, errb)
	}
}
