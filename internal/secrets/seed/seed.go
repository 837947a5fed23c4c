// Package seed is how a client that cannot reach the secret store yet
// hands a secret to the gateway: a file the gateway seals into the store at
// its next start (secrets.Store.ImportSeeds) and removes. It links nothing
// of the server, so the CLI (`agentry onboard`) can use it.
package seed

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentryhq/agentry/internal/fault"
)

var nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,127}$`)

// ValidName reports whether name can name a secret: a letter or _, then
// letters, digits, _, . or - (at most 128).
func ValidName(name string) bool { return nameRe.MatchString(name) }

// DirName is the folder of the credentials directory where a client
// that cannot reach the secret store yet (`agentry onboard`, before any
// gateway ran) leaves a secret for the gateway: one file per secret, named
// like the secret, mode 0600. The gateway seals each into the store at
// start and removes the file, so the value is in clear on disk only until
// the first start (as a key in a shell profile or an env file would be
// for ever).
const DirName = "seed"

// Dir is the seed folder of a credentials directory.
func Dir(credentialsDir string) string { return filepath.Join(credentialsDir, DirName) }

// Write leaves value for the gateway as secret name (atomically, 0600;
// the folder 0700). It replaces an earlier seed of the same name.
func Write(credentialsDir, name, value string) error {
	if !ValidName(name) {
		return &fault.Invalid{Msg: fmt.Sprintf("secret name %q must start with a letter or _ and hold only letters, digits, _, . or - (at most 128)", name)}
	}
	if strings.TrimSpace(value) == "" {
		return &fault.Invalid{Msg: "secret value is empty"}
	}
	dir := Dir(credentialsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("seed folder: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("seed %s: %w", name, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.WriteString(value)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err != nil {
		return fmt.Errorf("seed %s: %w", name, err)
	}
	return nil
}
