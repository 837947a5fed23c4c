package registry

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentryhq/agentry/internal/agentpkg"
)

// Limits of an unpacked archive.
const (
	maxUnpackedBytes = 256 << 20
	maxEntries       = 10000
)

func regexpMust(s string) *regexp.Regexp { return regexp.MustCompile(s) }

// Unpacked is what Unpack wrote.
type Unpacked struct {
	Dir   string   `json:"dir"`
	Files []string `json:"files"`
	// Packages are the agent packages found, verified.
	Packages []string `json:"packages"`
}

// ErrExists refuses to replace a folder without force.
var ErrExists = errors.New("target exists")

// Unpack checks an archive completely in memory (paths, types, sizes,
// every agent package inside), then writes it to a hidden staging folder
// beside dest and renames it into place, so a refused archive writes
// nothing and an accepted one appears whole. trusted, when not empty,
// must have signed every agent package inside.
func Unpack(archive []byte, dest string, force, stripTop bool, trusted []ed25519.PublicKey) (*Unpacked, error) {
	files, err := readArchive(archive, stripTop)
	if err != nil {
		return nil, err
	}
	res := &Unpacked{Dir: dest, Files: []string{}, Packages: []string{}}
	for _, f := range files {
		res.Files = append(res.Files, f.name)
		if strings.HasSuffix(f.name, agentpkg.Extension) {
			if _, err := agentpkg.Verify(f.data, agentpkg.VerifyOptions{TrustedKeys: trusted}); err != nil {
				return nil, fmt.Errorf("agent package %s in the archive: %w", f.name, err)
			}
			res.Packages = append(res.Packages, f.name)
		}
	}
	if len(trusted) > 0 && len(res.Packages) == 0 {
		return nil, fmt.Errorf("the archive holds no signed agent package, and a signing key is configured for its source")
	}
	if _, err := os.Lstat(dest); err == nil && !force {
		return nil, fmt.Errorf("%w: %s (use --force to replace it)", ErrExists, dest)
	}
	parent := filepath.Dir(dest)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(parent, ".pull-"+filepath.Base(dest)+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	root := filepath.Join(stage, "new")
	for _, f := range files {
		p := filepath.Join(root, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(p, f.data, f.mode); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	if _, err := os.Lstat(dest); err == nil {
		if err := os.Rename(dest, filepath.Join(stage, "old")); err != nil {
			return nil, fmt.Errorf("move %s aside: %w", dest, err)
		}
	}
	if err := os.Rename(root, dest); err != nil {
		os.Rename(filepath.Join(stage, "old"), dest)
		return nil, fmt.Errorf("install %s: %w", dest, err)
	}
	return res, nil
}

type archivedFile struct {
	name string
	mode os.FileMode
	data []byte
}

// readArchive reads a .tar.gz fully, refusing absolute paths, "..",
// links, devices and archives over the limits.
func readArchive(archive []byte, stripTop bool) ([]archivedFile, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, fmt.Errorf("not a .tar.gz archive: %w", err)
	}
	tr := tar.NewReader(gz)
	var files []archivedFile
	total := int64(0)
	seen := map[string]bool{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if len(files) >= maxEntries {
			return nil, fmt.Errorf("archive has more than %d entries", maxEntries)
		}
		name := strings.TrimPrefix(h.Name, "./")
		if stripTop {
			_, rest, ok := strings.Cut(name, "/")
			if !ok {
				continue // the top folder itself, or a pax header file
			}
			name = rest
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := checkArchivePath(strings.TrimSuffix(name, "/")); err != nil && name != "" {
				return nil, err
			}
			continue
		case tar.TypeReg:
		case tar.TypeXGlobalHeader:
			continue
		default:
			return nil, fmt.Errorf("archive entry %q is a link or special file; only files and folders are accepted", h.Name)
		}
		if err := checkArchivePath(name); err != nil {
			return nil, err
		}
		if seen[strings.ToLower(name)] {
			return nil, fmt.Errorf("archive entry %q appears twice", name)
		}
		seen[strings.ToLower(name)] = true
		total += h.Size
		if total > maxUnpackedBytes {
			return nil, fmt.Errorf("archive unpacks to more than %d bytes", maxUnpackedBytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size+1))
		if err != nil {
			return nil, fmt.Errorf("read archive entry %s: %w", name, err)
		}
		mode := os.FileMode(0o644)
		if h.Mode&0o111 != 0 {
			mode = 0o755
		}
		files = append(files, archivedFile{name: name, mode: mode, data: data})
	}
	if len(files) == 0 {
		return nil, errors.New("the archive is empty")
	}
	return files, nil
}

func checkArchivePath(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.ContainsAny(name, "\\\x00") || path.Clean(name) != name {
		return fmt.Errorf("archive entry %q is not a clean relative path", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return fmt.Errorf("archive entry %q escapes the target folder", name)
		}
	}
	return nil
}
