package secrets

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentryhq/agentry/internal/secrets/seed"
)

// ImportSeeds seals every seed left in credentialsDir into the store and
// removes its file; it returns the names imported. A file that is not a
// regular file, has a name no secret can have or cannot be stored is left
// in place and named in the error (the others are still imported), so a
// provider that is down at start loses nothing: the next start tries again.
func (s *Store) ImportSeeds(ctx context.Context, credentialsDir string) ([]string, error) {
	dir := seed.Dir(credentialsDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	var imported []string
	var errs []error
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			continue // a seed being written (or left by a crash mid-write)
		}
		path := filepath.Join(dir, name)
		if !e.Type().IsRegular() {
			errs = append(errs, fmt.Errorf("seed %s: not a regular file", path))
			continue
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("seed %s: %w", path, err))
			continue
		}
		if err := s.Set(ctx, name, strings.TrimSpace(string(raw))); err != nil {
			errs = append(errs, fmt.Errorf("seed %s: %w", path, err))
			continue
		}
		if err := os.Remove(path); err != nil {
			errs = append(errs, fmt.Errorf("seed %s stored but not removed: %w", path, err))
		}
		imported = append(imported, name)
	}
	return imported, errors.Join(errs...)
}
