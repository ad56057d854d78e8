// Package web serves the map page: MapLibre GL JS (vendored from npm, see
// static/MAPLIBRE-VERSION.txt) showing every tile layer, embedded in the
// binary so that it works offline.
package web

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

//go:embed static
var files embed.FS

// PageContentSecurityPolicy lets the map run its own scripts and call this
// origin only. MapLibre starts its workers from blob: URLs and draws some
// images from data: and blob: URLs.
const PageContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data: blob:; connect-src 'self'; worker-src 'self' blob:; child-src blob:; " +
	"base-uri 'self'; form-action 'none'; frame-ancestors 'none'"

var (
	static, _  = fs.Sub(files, "static")
	index      = mustRead(static, "index.html")
	favicon    = mustRead(static, "favicon.ico")
	fileServer = http.StripPrefix("/static", http.FileServerFS(static))
)

func mustRead(fsys fs.FS, name string) []byte {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return b
}

// Map serves the map page (/).
func Map(c *gin.Context) {
	c.Header("Content-Security-Policy", PageContentSecurityPolicy)
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", index)
}

// Static serves the page's scripts, styles and images (/static/*filepath).
func Static(c *gin.Context) {
	if strings.HasSuffix(c.Param("filepath"), "/") {
		c.AbortWithStatusJSON(http.StatusNotFound, gin.H{"detail": "Not Found"})
		return
	}
	c.Header("Cache-Control", "public, max-age=3600")
	fileServer.ServeHTTP(c.Writer, c.Request)
}

// Favicon serves the icon browsers ask for on /favicon.ico, whatever page
// they show; geogate's own, drawn for it.
func Favicon(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=86400")
	c.Data(http.StatusOK, "image/x-icon", favicon)
}
