// Package console holds the operator console: a web board served by the
// gateway at / (docs/console.md). It is plain HTML, CSS and JavaScript
// modules, embedded in the binary; no bundler, no CDN, nothing to build.
// The pages talk only to the public /api/v1 API with the credential the
// operator signs in with.
package console

import (
	"embed"
	"io/fs"
)

//go:embed web
var files embed.FS

// Assets is the console's file tree (index.html at its root).
func Assets() fs.FS {
	sub, err := fs.Sub(files, "web")
	if err != nil {
		panic(err) // the embedded tree always has web/
	}
	return sub
}
