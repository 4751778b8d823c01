// Package static embeds the portal's front-end assets (vendored htmx and
// Pico CSS, plus our own CSS and JS) into the binary.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
)

// FS holds the files served under /static/.
//
//go:embed *.js *.css *.svg
var FS embed.FS

// versions are the first 12 hex digits of each file's SHA-256.
var versions = func() map[string]string {
	out := map[string]string{}
	_ = fs.WalkDir(FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := FS.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[path] = hex.EncodeToString(sum[:])[:12]
		return nil
	})
	return out
}()

// URL is the address of an asset with its content's version in it
// (/static/app.css?v=1a2b3c4d5e6f): a browser may keep it for ever, and a
// new build's asset has a new address.
func URL(name string) string { return "/static/" + name + "?v=" + versions[name] }

// Version is the version of an asset ("" for none).
func Version(name string) string { return versions[name] }
