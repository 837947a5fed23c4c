// Package registry is the package registry: the index a registry serves
// (`agentryd registry serve`), the signatures over its archives, and the
// consumer side (`agentry registry probe|add`, `agentry pull`) that finds,
// downloads, verifies and unpacks <slug>-<version>.tar.gz archives.
package registry

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/agentryhq/agentry/internal/agentpkg"
)

// IndexFormatVersion is the index document's format_version.
const IndexFormatVersion = 1

// Paths a registry serves below its base URL.
const (
	IndexPath    = "/index.json"
	ArchivesPath = "/packages/"
)

// Index is GET <base_url>/index.json.
type Index struct {
	FormatVersion int `json:"format_version"`
	// KeyID and PublicKey name the registry's signing key (absent when the
	// registry does not sign).
	KeyID     string  `json:"key_id,omitempty"`
	PublicKey string  `json:"public_key,omitempty"`
	Packages  []Entry `json:"packages"`
}

// Entry is one package (slug) with its versions, newest first.
type Entry struct {
	Slug     string    `json:"slug"`
	Versions []Version `json:"versions"`
}

// Version is one archive.
type Version struct {
	Version string `json:"version"`
	// File is <slug>-<version>.tar.gz, served at /packages/<file>.
	File   string `json:"file"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Signature is base64 Ed25519 over SignedMessage(slug, version,
	// sha256); absent when the registry does not sign.
	Signature string `json:"signature,omitempty"`
}

// SignedMessage is what a registry signs for one archive: the slug and
// version are bound to the content, so an archive cannot be served under
// another name or version.
func SignedMessage(slug, version, sha256hex string) []byte {
	return []byte("agentry-registry-archive-v1\n" + slug + "\n" + version + "\n" + sha256hex + "\n")
}

// SignVersion fills in the signature of v.
func SignVersion(slug string, v *Version, key ed25519.PrivateKey) {
	v.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(key, SignedMessage(slug, v.Version, v.SHA256)))
}

// VerifyVersion checks v's signature against key.
func VerifyVersion(slug string, v Version, key ed25519.PublicKey) error {
	if v.Signature == "" {
		return fmt.Errorf("%s@%s is unsigned, and the registry's signing_key requires a signature", slug, v.Version)
	}
	sig, err := base64.StdEncoding.DecodeString(v.Signature)
	if err != nil || !ed25519.Verify(key, SignedMessage(slug, v.Version, v.SHA256), sig) {
		return fmt.Errorf("%s@%s: the signature does not verify with signing key %s (tampered, or signed by another key)", slug, v.Version, agentpkg.KeyID(key))
	}
	return nil
}

// archiveName matches <slug>-<version>.tar.gz with a semantic version.
var archiveName = regexp.MustCompile(`^([a-z0-9][a-z0-9_.-]*?)-v?([0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?)\.tar\.gz$`)

// ParseArchiveName splits <slug>-<version>.tar.gz.
func ParseArchiveName(name string) (slug, version string, ok bool) {
	m := archiveName.FindStringSubmatch(name)
	if m == nil || !semver.IsValid("v"+m[2]) {
		return "", "", false
	}
	return m[1], m[2], true
}

// SlugPattern is what a slug may look like.
var SlugPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,99}$`)

// sortVersions orders newest first by semantic version.
func sortVersions(vs []Version) {
	sort.SliceStable(vs, func(i, j int) bool { return semver.Compare("v"+vs[i].Version, "v"+vs[j].Version) > 0 })
}

// Pick returns the version asked for, or the newest release (the newest
// pre-release only when there is no release).
func (e Entry) Pick(want string) (Version, error) {
	want = strings.TrimPrefix(want, "v")
	if want != "" {
		if !semver.IsValid("v" + want) {
			return Version{}, fmt.Errorf("%q is not a semantic version (like 1.2.0)", want)
		}
		for _, v := range e.Versions {
			if semver.Compare("v"+v.Version, "v"+want) == 0 {
				return v, nil
			}
		}
		return Version{}, fmt.Errorf("%s has no version %s (has %s)", e.Slug, want, e.versionList())
	}
	vs := append([]Version(nil), e.Versions...)
	sortVersions(vs)
	for _, v := range vs {
		if semver.Prerelease("v"+v.Version) == "" {
			return v, nil
		}
	}
	if len(vs) == 0 {
		return Version{}, fmt.Errorf("%s has no versions", e.Slug)
	}
	return vs[0], nil
}

func (e Entry) versionList() string {
	out := make([]string, len(e.Versions))
	for i, v := range e.Versions {
		out[i] = v.Version
	}
	return strings.Join(out, ", ")
}

// Find returns the entry of slug.
func (ix *Index) Find(slug string) (Entry, bool) {
	for _, e := range ix.Packages {
		if e.Slug == slug {
			return e, true
		}
	}
	return Entry{}, false
}
