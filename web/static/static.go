// Package static embeds the portal's front-end assets (vendored htmx and
// Pico CSS, plus our own CSS and JS) into the binary.
package static

import "embed"

// FS holds the files served under /static/.
//
//go:embed *.js *.css *.svg
var FS embed.FS
