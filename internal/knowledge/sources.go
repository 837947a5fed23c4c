package knowledge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/netguard"
)

// A source of config.yaml (or added through the API) expands into
// documents: a file is one, a folder every supported file below it, a glob
// every supported file it matches, an http(s) URL one. Relative paths are
// relative to the workspace.

// docRef is one document a source expanded into: its key (the absolute
// path or the URL), the folder it must stay inside (for files from a
// folder or glob; "" for a file named directly and for URLs), or the
// reason it cannot be a document.
type docRef struct {
	Source string
	Root   string
	Err    string
}

// DocumentID is the stable id of a base's document: a hash of both.
func DocumentID(base, source string) string {
	sum := sha256.Sum256([]byte(base + "\x00" + source))
	return base + "-" + hex.EncodeToString(sum[:8])
}

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

// expand lists the documents of one source, sorted.
func expand(workspace, src string) []docRef {
	if isURL(src) {
		return []docRef{{Source: src}}
	}
	p := src
	if !filepath.IsAbs(p) {
		p = filepath.Join(workspace, p)
	}
	p = filepath.Clean(p)
	if strings.ContainsAny(filepath.Base(p), "*?[") || strings.ContainsAny(p, "*?[") {
		matches, err := filepath.Glob(p)
		if err != nil {
			return []docRef{{Source: p, Err: fmt.Sprintf("bad glob: %v", err)}}
		}
		root := globRoot(p)
		var out []docRef
		for _, m := range matches {
			if fi, err := os.Lstat(m); err == nil && !fi.IsDir() {
				out = append(out, docRef{Source: m, Root: root})
			}
		}
		return out
	}
	fi, err := os.Stat(p)
	if err != nil {
		return []docRef{{Source: p, Err: fmt.Sprintf("source not found: %v", errors.Unwrap(err))}}
	}
	if !fi.IsDir() {
		return []docRef{{Source: p}}
	}
	var out []docRef
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if q != p && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		// Every file, so an unsupported one is listed failed with the
		// reason rather than silently left out.
		if !strings.HasPrefix(d.Name(), ".") {
			out = append(out, docRef{Source: q, Root: p})
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out
}

// globRoot is the folder part of a glob before its first pattern element.
func globRoot(p string) string {
	parts := strings.Split(p, string(filepath.Separator))
	for i, part := range parts {
		if strings.ContainsAny(part, "*?[") {
			return strings.Join(parts[:i], string(filepath.Separator))
		}
	}
	return filepath.Dir(p)
}

// refusal is a document retrying cannot fix.
type refusal struct{ msg string }

func (r *refusal) Error() string { return r.msg }

func refuse(format string, args ...any) error { return &refusal{msg: fmt.Sprintf(format, args...)} }

// IsRefusal reports whether err is a document retrying cannot fix (the
// activity marks it non-retryable).
func IsRefusal(err error) bool {
	var r *refusal
	return errors.As(err, &r) || errors.Is(err, ErrUnsupported) || errors.Is(err, netguard.ErrBlocked)
}

// readFile reads a document from disk: a symlink or path that leads out
// of root, a non-regular file and a file over max bytes are refused
// without being read.
func readFile(p, root string, max int64) ([]byte, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, refuse("cannot read %s: %v", p, errors.Unwrap(err))
	}
	if root != "" {
		realRoot, err := filepath.EvalSymlinks(root)
		if err != nil {
			return nil, refuse("cannot read the source folder %s: %v", root, errors.Unwrap(err))
		}
		rel, err := filepath.Rel(realRoot, real)
		if err != nil || !filepath.IsLocal(rel) {
			return nil, refuse("%s leads out of its source folder %s (symlink or path escape): not read", p, root)
		}
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, refuse("cannot read %s: %v", p, errors.Unwrap(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, refuse("%s is not a regular file", p)
	}
	if fi.Size() > max {
		return nil, refuse("%s is %d bytes, over the limit of %d (knowledge.max_document_bytes): not read", p, fi.Size(), max)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, refuse("%s grew over the limit of %d bytes (knowledge.max_document_bytes)", p, max)
	}
	return data, nil
}

// fetchURL downloads a document through the SSRF policy, at most max
// bytes; it returns the body and its Content-Type.
func fetchURL(ctx context.Context, policy netguard.Policy, raw string, max int64, timeout time.Duration) ([]byte, string, error) {
	if _, err := policy.CheckURL(raw); err != nil {
		return nil, "", refuse("%v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return nil, "", refuse("bad URL %s: %v", raw, err)
	}
	req.Header.Set("User-Agent", "agentry-knowledge/1")
	resp, err := policy.Client(timeout).Do(req)
	if err != nil {
		if errors.Is(err, netguard.ErrBlocked) {
			return nil, "", refuse("%v", err)
		}
		return nil, "", fmt.Errorf("fetch %s: %w", raw, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
		return nil, "", refuse("fetch %s: HTTP %d", raw, resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("fetch %s: HTTP %d", raw, resp.StatusCode)
	}
	if resp.ContentLength > max {
		return nil, "", refuse("%s is %d bytes, over the limit of %d (knowledge.max_document_bytes): not read", raw, resp.ContentLength, max)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, "", fmt.Errorf("fetch %s: %w", raw, err)
	}
	if int64(len(data)) > max {
		return nil, "", refuse("%s is over the limit of %d bytes (knowledge.max_document_bytes): not read", raw, max)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// urlName is the path of a URL for KindOf.
func urlName(raw string) string {
	i := strings.IndexAny(raw, "?#")
	if i >= 0 {
		raw = raw[:i]
	}
	return path.Base(raw)
}
