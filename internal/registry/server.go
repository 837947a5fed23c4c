package registry

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentryhq/agentry/internal/agentpkg"
)

// Server serves a folder of <slug>-<version>.tar.gz archives and their
// index. The folder is read again at every index request (archives are
// hashed once per name, size and modification time), so dropping a file
// in publishes it.
type Server struct {
	Dir string
	// Key signs every archive in the index when set.
	Key ed25519.PrivateKey
	Log *slog.Logger

	mu     sync.Mutex
	hashes map[string]cachedHash
}

type cachedHash struct {
	size  int64
	mtime time.Time
	sum   string
}

// ServeHTTP answers GET /index.json, GET /packages/<file> and GET / (a
// short JSON description).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method not allowed"})
		return
	}
	switch {
	case r.URL.Path == IndexPath:
		ix, err := s.Index()
		if err != nil {
			s.log().Error("build index", "err", err)
			writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "cannot read the package folder"})
			return
		}
		writeJSON(w, http.StatusOK, ix)
	case strings.HasPrefix(r.URL.Path, ArchivesPath):
		name := strings.TrimPrefix(r.URL.Path, ArchivesPath)
		if _, _, ok := ParseArchiveName(name); !ok || strings.ContainsAny(name, `/\`) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such package archive"})
			return
		}
		f, err := os.Open(filepath.Join(s.Dir, name))
		if err != nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such package archive"})
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such package archive"})
			return
		}
		w.Header().Set("Content-Type", "application/gzip")
		http.ServeContent(w, r, name, st.ModTime(), f)
	case r.URL.Path == "/":
		writeJSON(w, http.StatusOK, map[string]any{"registry": "agentry", "index": IndexPath, "archives": ArchivesPath + "<slug>-<version>.tar.gz", "signed": s.Key != nil})
	default:
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not found"})
	}
}

func (s *Server) log() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// Index lists the folder's archives.
func (s *Server) Index() (*Index, error) {
	entries, err := os.ReadDir(s.Dir)
	if err != nil {
		return nil, err
	}
	ix := &Index{FormatVersion: IndexFormatVersion, Packages: []Entry{}}
	if s.Key != nil {
		pub := s.Key.Public().(ed25519.PublicKey)
		ix.KeyID, ix.PublicKey = agentpkg.KeyID(pub), hex.EncodeToString(pub)
	}
	bySlug := map[string]*Entry{}
	for _, e := range entries {
		slug, version, ok := ParseArchiveName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		sum, err := s.hash(e.Name(), info)
		if err != nil {
			return nil, err
		}
		v := Version{Version: version, File: e.Name(), Size: info.Size(), SHA256: sum}
		if s.Key != nil {
			SignVersion(slug, &v, s.Key)
		}
		if bySlug[slug] == nil {
			bySlug[slug] = &Entry{Slug: slug}
		}
		bySlug[slug].Versions = append(bySlug[slug].Versions, v)
	}
	for _, e := range bySlug {
		sortVersions(e.Versions)
		ix.Packages = append(ix.Packages, *e)
	}
	sort.Slice(ix.Packages, func(i, j int) bool { return ix.Packages[i].Slug < ix.Packages[j].Slug })
	return ix, nil
}

func (s *Server) hash(name string, info os.FileInfo) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.hashes[name]; ok && c.size == info.Size() && c.mtime.Equal(info.ModTime()) {
		return c.sum, nil
	}
	f, err := os.Open(filepath.Join(s.Dir, name))
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	if s.hashes == nil {
		s.hashes = map[string]cachedHash{}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	s.hashes[name] = cachedHash{size: info.Size(), mtime: info.ModTime(), sum: sum}
	return sum, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}
