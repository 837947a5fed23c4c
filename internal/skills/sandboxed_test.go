package skills_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentryhq/agentry/internal/sandbox"
	"github.com/agentryhq/agentry/internal/sandbox/sandboxtest"
	"github.com/agentryhq/agentry/internal/skills"
)

func confinedRunner(t *testing.T, caps sandbox.Caps) skills.Runner {
	t.Helper()
	j := sandbox.NewJail(sandbox.JailConfig{SystemTools: []string{"ls"}, Caps: caps})
	if !j.Isolation().Confined {
		t.Fatalf("no isolation here (install bubblewrap): %+v", j.Isolation())
	}
	return skills.Runner{Timeout: time.Minute, Jail: j, Caps: caps}
}

// The escape suite against a skill's tool script: the code is the script
// (#!/usr/bin/env python3), run the way the registry runs skill tools.
func TestSkillScriptEscapeSuite(t *testing.T) {
	r := confinedRunner(t, sandboxtest.SmallCaps())
	sandboxtest.Escape(t, func(ctx context.Context, code, dir string, caps sandbox.Caps) (sandbox.Result, error) {
		skill := t.TempDir()
		if err := os.WriteFile(filepath.Join(skill, "tool.py"), []byte("#!/usr/bin/env python3\n"+code), 0o755); err != nil {
			t.Fatal(err)
		}
		out := r.RunIn(ctx, skill, "tool.py", json.RawMessage(`{}`), dir, skills.Permissions{})
		if out.Sandbox == nil {
			t.Fatalf("not confined: %+v", out)
		}
		return *out.Sandbox, nil
	})
}

func TestSkillScriptOrdinaryCodeAndGrants(t *testing.T) {
	r := confinedRunner(t, sandbox.Caps{})
	skill := t.TempDir()
	script := "#!/bin/sh\nread args\necho \"got $args in $SKILL_DIR\"\nls /skill\n"
	if err := os.WriteFile(filepath.Join(skill, "t.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out := r.Run(ctx, skill, "t.sh", json.RawMessage(`{"q":1}`), false)
	if out.ExitCode != 127 || !strings.HasPrefix(out.Stdout, `got {"q":1} in /skill`) || !strings.Contains(out.Stderr, "ls: not found") {
		t.Fatalf("without grants (ls not on PATH): %+v", out)
	}
	out = r.RunIn(ctx, skill, "t.sh", json.RawMessage(`{}`), t.TempDir(), skills.Permissions{Commands: []string{"ls"}})
	if out.ExitCode != 0 || !strings.Contains(out.Stdout, "t.sh") {
		t.Fatalf("with ls granted: %+v", out)
	}
}

// Permissions are granted only through the consent recorded at install,
// for exactly the installed content.
func TestSkillPermissionsNeedConsent(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "netskill")
	os.MkdirAll(dir, 0o755)
	manifest := "---\nname: netskill\ndescription: d\npermissions: {network: true, commands: [ls]}\ntools: [{name: t, script: t.sh}]\n---\nbody\n"
	os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(manifest), 0o644)
	os.WriteFile(filepath.Join(dir, "t.sh"), []byte("#!/bin/sh\necho hi\n"), 0o755)
	s, err := skills.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Permissions.Network || len(s.Permissions.Commands) != 1 {
		t.Fatalf("manifest permissions: %+v", s.Permissions)
	}
	if g := skills.Granted(s); g.Network || len(g.Commands) > 0 {
		t.Fatalf("granted without consent: %+v", g)
	}
	src := t.TempDir()
	os.MkdirAll(filepath.Join(src, "netskill"), 0o755)
	for _, f := range []string{"SKILL.md", "t.sh"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		os.WriteFile(filepath.Join(src, "netskill", f), b, 0o755)
	}
	dest := filepath.Join(t.TempDir(), "skills")
	reg := skills.NewRegistry([]string{dest}, nil)
	in := &skills.Installer{Registry: reg, Dest: dest, DryRunner: confinedRunner(t, sandbox.Caps{})}
	plan, err := in.Install(context.Background(), skills.InstallRequest{Source: filepath.Join(src, "netskill")}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Permissions.Network {
		t.Fatalf("the review does not show the permissions: %+v", plan.Permissions)
	}
	if _, err := in.Install(context.Background(), skills.InstallRequest{Source: filepath.Join(src, "netskill"), Digest: plan.Digest, AcceptDanger: true}, true); err != nil {
		t.Fatal(err)
	}
	installed, err := skills.Load(filepath.Join(dest, "netskill"))
	if err != nil {
		t.Fatal(err)
	}
	if g := skills.Granted(installed); !g.Network || len(g.Commands) != 1 {
		t.Fatalf("consented permissions not granted: %+v", g)
	}
	// Changed after install: no grants.
	os.WriteFile(filepath.Join(dest, "netskill", "t.sh"), []byte("#!/bin/sh\necho changed\n"), 0o755)
	changed, err := skills.Load(filepath.Join(dest, "netskill"))
	if err != nil {
		t.Fatal(err)
	}
	if g := skills.Granted(changed); g.Network || len(g.Commands) > 0 {
		t.Fatalf("a changed skill kept its grants: %+v", g)
	}
}
