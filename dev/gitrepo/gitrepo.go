// Package gitrepo makes local git repositories for tests (package install
// jobs fetch from them: no network).
package gitrepo

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Bare commits files (path -> content; a path ending in .sh is made
// executable) to a new bare repository and returns its file:// URL.
// Commit adds a commit to it later.
func Bare(t testing.TB, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	bare := filepath.Join(root, "source.git")
	run(t, root, "init", "--quiet", "--bare", "--initial-branch=main", bare)
	url := "file://" + bare
	Commit(t, url, files)
	return url
}

// Commit pushes a commit with files to the repository at url.
func Commit(t testing.TB, url string, files map[string]string) {
	t.Helper()
	work := t.TempDir()
	run(t, work, "clone", "--quiet", url, ".")
	for name, content := range files {
		p := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	run(t, work, "add", "-A")
	run(t, work, "-c", "user.name=test", "-c", "user.email=test@example.invalid", "commit", "--quiet", "-m", "package source")
	run(t, work, "push", "--quiet", "origin", "HEAD:main")
}

func run(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
