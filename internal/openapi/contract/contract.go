// Package contract checks HTTP exchanges against geogate's OpenAPI
// document: every request the document calls invalid must be refused, and
// every response must be one the document describes for its route and
// status, with a body and headers matching their schemas. The tests route
// their traffic through it (see Proxy) so that the document cannot drift
// from what the service does.
package contract

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/geogate/geogate/internal/openapi"
)

// Checker validates exchanges against the document.
type Checker struct {
	doc    *openapi3.T
	router routers.Router
	errSch *openapi3.Schema
}

var registerDecoders sync.Once

// New loads and validates the embedded document, with the default limits,
// and returns a Checker for it. It errs when the document is not valid
// OpenAPI.
func New(ctx context.Context) (*Checker, error) {
	return NewFor(ctx, openapi.YAML())
}

// NewFor is New for the document data (YAML or JSON), for example the one
// a running service serves with its configured limits.
func NewFor(ctx context.Context, data []byte) (*Checker, error) {
	registerDecoders.Do(func() {
		openapi3filter.RegisterBodyDecoder("application/vnd.mapbox-vector-tile", openapi3filter.FileBodyDecoder)
		openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.FileBodyDecoder)         // the map page on /
		openapi3filter.RegisterBodyDecoder("text/event-stream", openapi3filter.FileBodyDecoder) // GET /events/stream
	})
	doc, err := LoadData(ctx, data)
	if err != nil {
		return nil, err
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi router: %w", err)
	}
	errRef := doc.Components.Schemas["HTTPError"]
	if errRef == nil || errRef.Value == nil {
		return nil, errors.New("openapi: components.schemas.HTTPError is missing")
	}
	return &Checker{doc: doc, router: router, errSch: errRef.Value}, nil
}

// Load parses the embedded document and validates it as OpenAPI.
func Load(ctx context.Context) (*openapi3.T, error) { return LoadData(ctx, openapi.YAML()) }

// LoadData parses a document (YAML or JSON) and validates it as OpenAPI.
func LoadData(ctx context.Context, data []byte) (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	loader.Context = ctx
	doc, err := loader.LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("load the OpenAPI document: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("the document is not valid OpenAPI: %w", err)
	}
	return doc, nil
}

// Exchange is one request and the response it got. Bodies are whole;
// Body may be gzip-compressed as its Content-Encoding says.
type Exchange struct {
	Request     *http.Request
	RequestBody []byte
	Status      int
	Header      http.Header
	Body        []byte
}

// undocumented are the routes of the documentation UI and of the map
// page's files and icon (internal/web), which, as in FastAPI, are not part of the
// API description. The landing page / is: OGC API clients start there.
func undocumented(path string) bool {
	return path == "/docs" || path == "/redoc" || strings.HasPrefix(path, "/docs/assets/") ||
		strings.HasPrefix(path, "/static/") || path == "/favicon.ico"
}

// Check returns what in x contradicts the document; nil when nothing does.
func (c *Checker) Check(ctx context.Context, x Exchange) []string {
	req := x.Request
	if undocumented(req.URL.Path) || isPreflight(req) {
		return nil
	}
	// HEAD is GET without the body (RFC 9110); the document lists GET
	// only, and a HEAD answer is checked as the GET's, body aside.
	head := req.Method == http.MethodHead
	if head {
		if len(x.Body) > 0 {
			return []string{fmt.Sprintf("HEAD answered with a body of %d bytes", len(x.Body))}
		}
		req = req.Clone(ctx)
		req.Method = http.MethodGet
	}
	body, err := decodedBody(x.Header, x.Body)
	if err != nil && !head {
		return []string{err.Error()}
	}
	route, params, err := c.router.FindRoute(req)
	switch {
	case errors.Is(err, routers.ErrPathNotFound):
		return c.checkFallback(http.StatusNotFound, "undocumented path", x.Status, x.Header, body, head)
	case errors.Is(err, routers.ErrMethodNotAllowed):
		return c.checkFallback(http.StatusMethodNotAllowed, "undocumented method", x.Status, x.Header, body, head)
	case err != nil:
		return []string{fmt.Sprintf("finding the route: %v", err)}
	}

	r2 := req.Clone(ctx)
	r2.Body = io.NopCloser(bytes.NewReader(x.RequestBody))
	if len(x.RequestBody) > 0 && r2.Header.Get("Content-Type") == "" {
		// A body without a Content-Type is read as JSON, as FastAPI does;
		// the document cannot say so.
		r2.Header.Set("Content-Type", "application/json")
	}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: r2, PathParams: params, Route: route, Options: opts}
	var out []string
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && x.Status < 400 {
		out = append(out, fmt.Sprintf("the document rejects this request but the service answered %d: %v", x.Status, oneLine(err)))
	}
	rin := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 x.Status,
		Header:                 x.Header,
		Options: &openapi3filter.Options{
			AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
			IncludeResponseStatus: true,
			MultiError:            true,
			ExcludeResponseBody:   head,
		},
	}
	rin.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, rin); err != nil {
		out = append(out, fmt.Sprintf("response %d does not match the document: %v", x.Status, oneLine(err)))
	}
	return out
}

// checkFallback checks an answer to a request the document does not
// describe: the only acceptable answer is want with a {"detail": ...} body.
func (c *Checker) checkFallback(want int, what string, status int, h http.Header, body []byte, head bool) []string {
	if status != want {
		return []string{fmt.Sprintf("%s answered %d (want it documented, or %d)", what, status, want)}
	}
	if head {
		body = []byte(`{"detail":"the body HEAD leaves out"}`)
	}
	var v any
	if err := jsonUnmarshal(body, &v); err != nil {
		return []string{fmt.Sprintf("%d body is not JSON: %v", status, err)}
	}
	if err := c.errSch.VisitJSON(v); err != nil {
		return []string{fmt.Sprintf("%d body does not match HTTPError: %v", status, oneLine(err))}
	}
	if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return []string{fmt.Sprintf("%d Content-Type = %q, want application/json", status, ct)}
	}
	return nil
}

func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

func decodedBody(h http.Header, b []byte) ([]byte, error) {
	if !strings.EqualFold(h.Get("Content-Encoding"), "gzip") {
		return b, nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("Content-Encoding: gzip but the body is not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("Content-Encoding: gzip but the body does not decompress: %v", err)
	}
	return out, nil
}

// oneLine shortens a validation error to its gist; kin-openapi errors
// carry the whole schema and value.
func oneLine(err error) string {
	s := err.Error()
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "Schema:") || strings.HasPrefix(l, "Value:") {
			continue
		}
		if strings.HasPrefix(l, "{") || strings.HasPrefix(l, "}") || strings.HasPrefix(l, "\"") || strings.HasPrefix(l, "]") || strings.HasPrefix(l, "[") {
			continue
		}
		lines = append(lines, l)
	}
	s = strings.Join(lines, " | ")
	if len(s) > 600 {
		s = s[:600] + "..."
	}
	return s
}
