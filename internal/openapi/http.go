package openapi

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/httpx"
)

// PageContentSecurityPolicy lets the documentation pages run their own
// scripts and styles and call the API on the same origin, and nothing else:
// Swagger UI and ReDoc set inline styles, ReDoc runs its search in a blob:
// worker, both draw small images from data: URLs.
const PageContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; " +
	"img-src 'self' data:; font-src 'self' data:; connect-src 'self'; worker-src 'self' blob:; " +
	"base-uri 'self'; form-action 'none'; frame-ancestors 'none'"

// Docs serves the API description and the interactive documentation.
type Docs struct {
	spec, desc   *asset
	swagger, doc *asset
}

// New returns the documentation handlers for the document with limits l.
// It errs when the embedded document does not parse.
func New(l Limits) (*Docs, error) {
	doc, err := JSON(l)
	if err != nil {
		return nil, err
	}
	return &Docs{spec: newAsset(doc, "application/json"), desc: newAsset(doc, ServiceDescType), swagger: page("assets/docs.html"), doc: page("assets/redoc.html")}, nil
}

// Spec serves the document as JSON (/openapi.json).
func (d *Docs) Spec(c *gin.Context) { d.spec.serve(c, "no-cache") }

// ServiceDescType is the media type OpenAPI registers for its JSON
// documents, which OGC API clients look for on /api.
const ServiceDescType = "application/vnd.oai.openapi+json;version=3.1"

// ServiceDesc serves the document as OGC API's service description (/api),
// under OpenAPI's own media type, or as application/json to a client that
// lists that and not the former (GDAL before 3.7 asks for OpenAPI 3.0 or
// JSON, and takes the JSON).
func (d *Docs) ServiceDesc(c *gin.Context) {
	a := c.GetHeader("Accept")
	if strings.Contains(a, "application/json") && !strings.Contains(a, ServiceDescType) {
		d.spec.serve(c, "no-cache")
		return
	}
	d.desc.serve(c, "no-cache")
}

// SwaggerUI serves the interactive documentation (/docs).
func (d *Docs) SwaggerUI(c *gin.Context) { servePage(c, d.swagger) }

// Redoc serves the reference documentation (/redoc).
func (d *Docs) Redoc(c *gin.Context) { servePage(c, d.doc) }

// Asset serves the pages' scripts and styles (/docs/assets/*filepath).
func (d *Docs) Asset(c *gin.Context) { serveAsset(c) }

func page(name string) *asset {
	b, err := fs.ReadFile(assets, name)
	if err != nil {
		panic(err) // embedded at build time: cannot happen
	}
	return newAsset(b, "text/html; charset=utf-8")
}

func servePage(c *gin.Context, a *asset) {
	c.Header("Content-Security-Policy", PageContentSecurityPolicy)
	a.serve(c, "no-cache")
}

var (
	assetMu    sync.Mutex
	assetCache = map[string]*asset{}
)

func serveAsset(c *gin.Context) {
	name := path.Clean("/" + c.Param("filepath"))
	a := lookupAsset(strings.TrimPrefix(name, "/"))
	if a == nil {
		httpx.AbortStatus(c, http.StatusNotFound, "Not Found")
		return
	}
	a.serve(c, "public, max-age=3600")
}

// lookupAsset returns the embedded file under assets/, or nil. Pages are
// served on their own routes, not here.
func lookupAsset(name string) *asset {
	if name == "" || strings.HasSuffix(name, ".html") {
		return nil
	}
	assetMu.Lock()
	defer assetMu.Unlock()
	if a, ok := assetCache[name]; ok {
		return a
	}
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil {
		return nil
	}
	typ := mime.TypeByExtension(path.Ext(name))
	switch {
	case strings.HasSuffix(name, ".js"):
		typ = "text/javascript; charset=utf-8"
	case strings.HasSuffix(name, ".css"):
		typ = "text/css; charset=utf-8"
	case strings.HasSuffix(name, ".txt"), strings.HasSuffix(name, ".md"), path.Base(name) == "LICENSE", path.Base(name) == "NOTICE":
		typ = "text/plain; charset=utf-8"
	case typ == "":
		typ = "application/octet-stream"
	}
	a := newAsset(b, typ)
	assetCache[name] = a
	return a
}

// asset is one response body with its type, ETag and a gzip copy made the
// first time a client accepts it.
type asset struct {
	raw   []byte
	typ   string
	etag  string
	once  sync.Once
	gzBuf []byte
}

func newAsset(b []byte, typ string) *asset {
	sum := sha256.Sum256(b)
	return &asset{raw: b, typ: typ, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

func (a *asset) gz() []byte {
	a.once.Do(func() {
		var buf bytes.Buffer
		w, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = w.Write(a.raw)
		_ = w.Close()
		a.gzBuf = buf.Bytes()
	})
	return a.gzBuf
}

func (a *asset) serve(c *gin.Context, cacheControl string) {
	h := c.Writer.Header()
	h.Set("ETag", a.etag)
	h.Set("Cache-Control", cacheControl)
	h.Add("Vary", "Accept-Encoding")
	if match := c.GetHeader("If-None-Match"); match != "" && strings.Contains(match, a.etag) {
		c.Status(http.StatusNotModified)
		return
	}
	body := a.raw
	if len(body) > 1024 && acceptsGzip(c.GetHeader("Accept-Encoding")) {
		body = a.gz()
		h.Set("Content-Encoding", "gzip")
	}
	c.Data(http.StatusOK, a.typ, body)
}

func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q=")
		if !ok {
			return true
		}
		f, err := strconv.ParseFloat(q, 64)
		return err == nil && f > 0
	}
	return false
}
