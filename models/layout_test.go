package models

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines bounds every Go file of models/ (tests and sub-packages
// included): a file past it holds more than one job; split it by domain
// (see the package doc).
const maxFileLines = 800

func TestNoFileAboveTheLimit(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := bytes.Count(data, []byte("\n")); n > maxFileLines {
			t.Errorf("models/%s has %d lines, more than %d: split it", path, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The services in internal/ take their domain's store interface
// (stores.go), never the whole *Store; their tests may open one.
func TestInternalServicesTakeStoreInterfaces(t *testing.T) {
	err := filepath.WalkDir(filepath.Join("..", "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for line := 1; sc.Scan(); line++ {
			if text := sc.Text(); strings.Contains(text, "*models.Store") || strings.Contains(text, "models.NewCostLedger(") {
				t.Errorf("%s:%d takes the whole store (%s): take the domain's interface from models/stores.go", path, line, strings.TrimSpace(text))
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
}
