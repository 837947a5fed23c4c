package registry

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/agentryhq/agentry/internal/agentpkg"
	"github.com/agentryhq/agentry/internal/config"
	"github.com/agentryhq/agentry/internal/netguard"
)

// Registry types of the registries: config.
const (
	// TypeAgentry is a registry serving index.json (agentryd registry serve).
	TypeAgentry = "agentry"
	// TypeGitHub resolves owner/repo to the repository's tarball.
	TypeGitHub = "github"
	// DefaultGitHubBase serves repository tarballs.
	DefaultGitHubBase = "https://codeload.github.com"
	// DefaultPriority is the priority of an entry without one; lower
	// values are asked first.
	DefaultPriority = 100
	// MaxArchiveBytes bounds a downloaded archive.
	MaxArchiveBytes = 64 << 20
	maxIndexBytes   = 8 << 20
)

// Source is one configured registry, ready to use.
type Source struct {
	ID          string
	Type        string
	BaseURL     string
	Priority    int
	AuthHeaders map[string]string
	// SigningKey, when set, must have signed everything taken from here.
	SigningKey ed25519.PublicKey
}

// Sources turns the registries: config into sources ordered by priority
// (lower first), then id. Errors name the entry and key.
func Sources(regs []config.RegistryConfig) ([]Source, error) {
	out := make([]Source, 0, len(regs))
	seen := map[string]bool{}
	for i, r := range regs {
		where := fmt.Sprintf("registries[%d]", i)
		if !SlugPattern.MatchString(r.ID) || strings.Contains(r.ID, "/") {
			return nil, fmt.Errorf("%s.id: %q must be lower-case letters, digits, ., - or _", where, r.ID)
		}
		if seen[r.ID] {
			return nil, fmt.Errorf("%s.id: %q is used twice", where, r.ID)
		}
		seen[r.ID] = true
		s := Source{ID: r.ID, Type: r.Type, BaseURL: strings.TrimRight(r.BaseURL, "/"), Priority: r.Priority, AuthHeaders: r.AuthHeaders}
		if s.Type == "" {
			s.Type = TypeAgentry
		}
		if s.Type != TypeAgentry && s.Type != TypeGitHub {
			return nil, fmt.Errorf("%s.type: unknown type %q (use %s or %s)", where, r.Type, TypeAgentry, TypeGitHub)
		}
		if s.Type == TypeGitHub && s.BaseURL == "" {
			s.BaseURL = DefaultGitHubBase
		}
		if err := CheckBaseURL(s.BaseURL); err != nil {
			return nil, fmt.Errorf("%s.base_url: %v", where, err)
		}
		if s.Priority == 0 {
			s.Priority = DefaultPriority
		}
		if r.SigningKey != "" {
			k, err := agentpkg.ParsePublicKey(r.SigningKey)
			if err != nil {
				return nil, fmt.Errorf("%s.signing_key: %v", where, err)
			}
			s.SigningKey = k
		}
		out = append(out, s)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority < out[j].Priority
		}
		return out[i].ID < out[j].ID
	})
	return out, nil
}

// CheckBaseURL accepts http(s) URLs with a host.
func CheckBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", raw)
	}
	return nil
}

// Fetcher talks to registries.
type Fetcher struct {
	HTTP *http.Client
}

// NewFetcher uses a client with a timeout and no SSRF policy: it is for
// the command line (agentry registry, agentry pull), which fetches on
// its own user's machine with that user's authority.
func NewFetcher() *Fetcher { return &Fetcher{HTTP: &http.Client{Timeout: 2 * time.Minute}} }

// NewGuardedFetcher is a fetcher for fetches made on someone else's
// behalf (a gateway-side pull or index read): every connection, redirects
// included, passes the SSRF policy at dial time (netguard.Policy.Client).
func NewGuardedFetcher(p netguard.Policy) *Fetcher {
	return &Fetcher{HTTP: p.Client(2 * time.Minute)}
}

// Index fetches and decodes a registry's index, naming what went wrong:
// an HTML page, a 404, a document that is not an index.
func (f *Fetcher) Index(ctx context.Context, src Source) (*Index, error) {
	u := src.BaseURL + IndexPath
	body, ctype, err := f.get(ctx, src, u, maxIndexBytes)
	if err != nil {
		return nil, err
	}
	trim := bytes.TrimSpace(body)
	if strings.Contains(ctype, "html") || bytes.HasPrefix(trim, []byte("<")) {
		return nil, fmt.Errorf("%s answered an HTML page, not a registry index; is %s the registry's address?", u, src.BaseURL)
	}
	var ix Index
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&ix); err != nil {
		return nil, fmt.Errorf("%s is not a registry index: %v", u, err)
	}
	if ix.FormatVersion != IndexFormatVersion {
		return nil, fmt.Errorf("%s: unknown index format_version %d (this client reads %d)", u, ix.FormatVersion, IndexFormatVersion)
	}
	if ix.PublicKey != "" {
		k, err := agentpkg.ParsePublicKey(ix.PublicKey)
		if err != nil || agentpkg.KeyID(k) != ix.KeyID {
			return nil, fmt.Errorf("%s: the index's public_key and key_id do not match", u)
		}
	}
	return &ix, nil
}

// get downloads url with the source's auth headers, up to limit bytes.
func (f *Fetcher) get(ctx context.Context, src Source, u string, limit int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", fmt.Errorf("registry %s: %w", src.ID, err)
	}
	for k, v := range src.AuthHeaders {
		req.Header.Set(k, v)
	}
	req.Header.Set("User-Agent", "agentry-pull")
	resp, err := f.HTTP.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("cannot reach %s: %w", u, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, "", fmt.Errorf("%s: not found (HTTP 404)", u)
	}
	if resp.StatusCode >= 300 {
		return nil, "", fmt.Errorf("%s answered HTTP %d", u, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, "", fmt.Errorf("read %s: %w", u, err)
	}
	if int64(len(body)) > limit {
		return nil, "", fmt.Errorf("%s is larger than %d bytes", u, limit)
	}
	return body, strings.ToLower(resp.Header.Get("Content-Type")), nil
}

// Ref is a parsed pull argument.
type Ref struct {
	// Registry is the registry id ("" searches every registry by priority).
	Registry string
	Slug     string
	Version  string
	// Owner and Repo are set for an owner/repo reference (GitHub).
	Owner, Repo string
	// URL is set for a direct archive URL.
	URL string
}

// ParseRef reads <registry-id>/<slug>[@version], <slug>[@version],
// owner/repo or an http(s) URL. A first segment that names a configured
// registry makes it a registry reference; otherwise a two-segment
// reference is owner/repo.
func ParseRef(arg string, sources []Source) (Ref, error) {
	if strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://") {
		if err := CheckBaseURL(arg); err != nil {
			return Ref{}, err
		}
		return Ref{URL: arg}, nil
	}
	name, version, _ := strings.Cut(arg, "@")
	first, rest, two := strings.Cut(name, "/")
	if two && strings.Contains(rest, "/") {
		return Ref{}, fmt.Errorf("%q: use <registry-id>/<slug>[@version], <slug>[@version], owner/repo or a URL", arg)
	}
	if two {
		for _, s := range sources {
			if s.ID == first {
				if !SlugPattern.MatchString(rest) {
					return Ref{}, fmt.Errorf("%q is not a package slug", rest)
				}
				return Ref{Registry: first, Slug: rest, Version: version}, nil
			}
		}
		if version != "" {
			return Ref{}, fmt.Errorf("%q: no registry has the id %q, and owner/repo takes no @version", arg, first)
		}
		if !githubName.MatchString(first) || !githubName.MatchString(rest) {
			return Ref{}, fmt.Errorf("%q: no registry has the id %q, and it is not an owner/repo name", arg, first)
		}
		return Ref{Owner: first, Repo: rest}, nil
	}
	if !SlugPattern.MatchString(name) {
		return Ref{}, fmt.Errorf("%q is not a package slug", name)
	}
	return Ref{Slug: name, Version: version}, nil
}

var githubName = regexpMust(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// Resolved is a reference pinned to one archive.
type Resolved struct {
	Source  Source
	Slug    string
	Version Version
	URL     string
	// Signed tells that the archive's registry signature was checked.
	Signed bool
	// StripTop drops the archive's single top-level folder (GitHub
	// tarballs wrap the repository in <repo>-<sha>/).
	StripTop bool
}

// Resolve finds the archive a reference names. Registry references ask
// the named registry, bare slugs ask every agentry registry in priority
// order and take the first that has the slug.
func (f *Fetcher) Resolve(ctx context.Context, ref Ref, sources []Source) (*Resolved, error) {
	switch {
	case ref.URL != "":
		return f.resolveURL(ctx, ref.URL, sources)
	case ref.Owner != "":
		for _, s := range sources {
			if s.Type == TypeGitHub {
				return &Resolved{Source: s, Slug: ref.Repo, Version: Version{Version: "HEAD"}, StripTop: true,
					URL: s.BaseURL + "/" + url.PathEscape(ref.Owner) + "/" + url.PathEscape(ref.Repo) + "/tar.gz/HEAD"}, nil
			}
		}
		s := Source{ID: "github", Type: TypeGitHub, BaseURL: DefaultGitHubBase}
		return &Resolved{Source: s, Slug: ref.Repo, Version: Version{Version: "HEAD"}, StripTop: true,
			URL: s.BaseURL + "/" + url.PathEscape(ref.Owner) + "/" + url.PathEscape(ref.Repo) + "/tar.gz/HEAD"}, nil
	}
	var tried []string
	for _, s := range sources {
		if s.Type != TypeAgentry || (ref.Registry != "" && s.ID != ref.Registry) {
			continue
		}
		ix, err := f.Index(ctx, s)
		if err != nil {
			if ref.Registry != "" {
				return nil, fmt.Errorf("registry %s: %w", s.ID, err)
			}
			tried = append(tried, fmt.Sprintf("%s (%v)", s.ID, err))
			continue
		}
		e, ok := ix.Find(ref.Slug)
		if !ok {
			tried = append(tried, s.ID+" (no such package)")
			continue
		}
		v, err := e.Pick(ref.Version)
		if err != nil {
			return nil, fmt.Errorf("registry %s: %w", s.ID, err)
		}
		return &Resolved{Source: s, Slug: ref.Slug, Version: v, URL: s.BaseURL + ArchivesPath + url.PathEscape(v.File)}, nil
	}
	if len(tried) == 0 {
		if ref.Registry != "" {
			return nil, fmt.Errorf("no registry with id %q (see agentry registry list)", ref.Registry)
		}
		return nil, errors.New("no registries are configured: add one with `agentry registry add <url>`")
	}
	return nil, fmt.Errorf("package %q not found; asked: %s", ref.Slug, strings.Join(tried, "; "))
}

// resolveURL pins a direct archive URL. When the URL lies below a
// configured registry, that registry's index entry (checksum, signature)
// and signing key apply.
func (f *Fetcher) resolveURL(ctx context.Context, u string, sources []Source) (*Resolved, error) {
	file := path.Base(u)
	slug, version, ok := ParseArchiveName(file)
	if !ok {
		return nil, fmt.Errorf("%s does not name a <slug>-<version>.tar.gz archive", u)
	}
	for _, s := range sources {
		if s.Type == TypeAgentry && strings.HasPrefix(u, s.BaseURL+"/") {
			ix, err := f.Index(ctx, s)
			if err != nil {
				return nil, fmt.Errorf("registry %s: %w", s.ID, err)
			}
			e, _ := ix.Find(slug)
			for _, v := range e.Versions {
				if v.File == file {
					return &Resolved{Source: s, Slug: slug, Version: v, URL: u}, nil
				}
			}
			return nil, fmt.Errorf("registry %s does not list %s", s.ID, file)
		}
	}
	return &Resolved{Source: Source{ID: "url", Type: "url"}, Slug: slug, Version: Version{Version: version, File: file}, URL: u}, nil
}

// Download fetches the archive and checks it against the index entry:
// size and SHA-256, and the registry signature when the source has a
// signing key. A source with a signing key but no index entry to check
// (GitHub, a bare URL) is checked per package inside the archive instead
// (see Unpack).
func (f *Fetcher) Download(ctx context.Context, r *Resolved) ([]byte, error) {
	data, _, err := f.get(ctx, r.Source, r.URL, MaxArchiveBytes)
	if err != nil {
		return nil, err
	}
	if r.Version.SHA256 != "" {
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != r.Version.SHA256 || int64(len(data)) != r.Version.Size {
			return nil, fmt.Errorf("%s: the archive's checksum %s does not match the index (%s); it was changed or corrupted", r.URL, got, r.Version.SHA256)
		}
	}
	if r.Source.SigningKey != nil && r.Source.Type == TypeAgentry {
		if err := VerifyVersion(r.Slug, r.Version, r.Source.SigningKey); err != nil {
			return nil, fmt.Errorf("registry %s: %w", r.Source.ID, err)
		}
		r.Signed = true
	}
	return data, nil
}
