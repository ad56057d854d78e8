package geofence

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"
	geom "github.com/twpayne/go-geom"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
)

// Options configure the routes Register adds.
type Options struct {
	Rules
	// Cursors signs paging cursors; nil means a random key per start.
	Cursors *Cursors
	// Within, Read and Write run before the handlers of /within, of the
	// geofence reads (including containment) and of the geofence writes:
	// authentication, scopes, rate limits.
	Within, Read, Write []gin.HandlerFunc
	// CheckCircle, when set, may refuse a search circle (a point has radius
	// 0) for the caller, for example outside its spatial scope; its error
	// goes through httpx.Abort.
	CheckCircle func(c *gin.Context, lng, lat, radiusM float64) error
	// CheckGeometry, when set, may refuse a geofence geometry to be written.
	CheckGeometry func(c *gin.Context, g geom.T) error
	// Scope, when set, returns the caller's spatial scope as a WKB
	// (Multi)Polygon in EPSG:4326, nil for the whole world. Reads then see
	// only the fences meeting it, and updates and deletes find only those
	// wholly inside it (others are 404s, so that their existence does not
	// leak).
	Scope func(c *gin.Context) []byte
}

type handler struct {
	svc *Service
	o   Options
}

// Register adds the proximity and geofence routes to r.
func Register(r gin.IRouter, svc *Service, o Options) {
	if o.Cursors == nil {
		o.Cursors = NewCursors("")
	}
	h := &handler{svc: svc, o: o}
	with := func(mw []gin.HandlerFunc, fn gin.HandlerFunc) []gin.HandlerFunc {
		return append(append([]gin.HandlerFunc{}, mw...), fn)
	}
	r.GET("/within", with(o.Within, h.within)...)
	r.GET("/geofences", with(o.Read, h.list)...)
	r.POST("/geofences", with(o.Write, h.create)...)
	r.GET("/geofences/contains", with(o.Read, h.contains)...)
	r.POST("/geofences/contains", with(o.Read, h.containsBatch)...)
	r.GET("/geofences/:id", with(o.Read, h.get)...)
	r.PUT("/geofences/:id", append([]gin.HandlerFunc{notContains}, with(o.Write, h.update)...)...)
	r.DELETE("/geofences/:id", append([]gin.HandlerFunc{notContains}, with(o.Write, h.delete)...)...)
}

// notContains answers PUT and DELETE /geofences/contains with a 405, as
// the router does for any other method a route lacks, before credentials
// are checked: /geofences/contains is a route of its own (GET, POST), not
// a fence whose id is "contains".
func notContains(c *gin.Context) {
	if c.Param("id") == "contains" {
		c.Header("Allow", "GET, POST")
		httpx.AbortStatus(c, http.StatusMethodNotAllowed, "Method Not Allowed")
	}
}

// ParseRadius returns the radius parameter of a /within request and
// whether it is valid (finite, above 0, at most maxRadius metres), for a
// rate-limit cost computed before the handler runs. The handler rejects an
// invalid radius with a 422 itself.
func ParseRadius(c *gin.Context, maxRadius float64) (float64, bool) {
	errs := &apperr.ValidationError{}
	return radius(c.Request.URL.Query(), Rules{MaxRadius: maxRadius}, errs)
}

const geoJSON = "application/geo+json"

func (h *handler) within(c *gin.Context) {
	q, err := parseWithin(c.Request.URL.Query(), h.o.Rules, h.svc.names)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	scope := withinScope(q.WithinQuery)
	if q.Cursor != "" {
		pos, err := h.o.Cursors.Decode(scope, q.Cursor)
		if err != nil {
			httpx.Abort(c, badCursor())
			return
		}
		q.After = &pos
	}
	if !h.check(c, q.Lng, q.Lat, q.Radius) {
		return
	}
	page, err := h.svc.Within(c.Request.Context(), q.WithinQuery)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	next := ""
	if page.Next != nil {
		next = h.o.Cursors.Encode(scope, *page.Next)
	}
	c.Data(http.StatusOK, geoJSON, collection(page.Features, true, nextLink(c.Request.URL, next)))
}

func badCursor() error {
	return apperr.InvalidField("Invalid or expired cursor: use the link of a previous page of the same query.", "value_error", "query", "cursor")
}

func (h *handler) scope(c *gin.Context) []byte {
	if h.o.Scope == nil {
		return nil
	}
	return h.o.Scope(c)
}

func (h *handler) check(c *gin.Context, lng, lat, r float64) bool {
	if h.o.CheckCircle == nil {
		return true
	}
	if err := h.o.CheckCircle(c, lng, lat, r); err != nil {
		httpx.Abort(c, err)
		return false
	}
	return true
}

// nextLink is the request's URL with cursor set, relative to the service
// root, or "" without a cursor.
func nextLink(u *url.URL, cursor string) string {
	if cursor == "" {
		return ""
	}
	q := u.Query()
	q.Set("cursor", cursor)
	return u.Path + "?" + q.Encode()
}

func (h *handler) list(c *gin.Context) {
	q, err := parseList(c.Request.URL.Query(), h.o.Rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	scope := listScope(q.ListQuery)
	if q.Cursor != "" {
		pos, err := h.o.Cursors.Decode(scope, q.Cursor)
		if err != nil {
			httpx.Abort(c, badCursor())
			return
		}
		q.AfterID = pos.ID
	}
	q.Scope = h.scope(c)
	fs, more, err := h.svc.ListFences(c.Request.Context(), q.ListQuery)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	next := ""
	if more {
		next = h.o.Cursors.Encode(scope, Position{ID: fs[len(fs)-1].ID})
	}
	c.Data(http.StatusOK, geoJSON, collection(fs, false, nextLink(c.Request.URL, next)))
}

func (h *handler) get(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	f, err := h.svc.GetFence(c.Request.Context(), id, h.scope(c))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Data(http.StatusOK, geoJSON, appendFeature(nil, f, false))
}

func (h *handler) create(c *gin.Context) {
	in, ok := h.readFence(c)
	if !ok {
		return
	}
	f, err := h.svc.CreateFence(c.Request.Context(), in)
	if err != nil {
		abortWrite(c, err)
		return
	}
	c.Header("Location", "/geofences/"+strconv.FormatInt(f.ID, 10))
	c.Data(http.StatusCreated, geoJSON, appendFeature(nil, f, false))
}

func (h *handler) update(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	in, ok := h.readFence(c)
	if !ok {
		return
	}
	f, err := h.svc.UpdateFence(c.Request.Context(), id, in, h.scope(c))
	if err != nil {
		abortWrite(c, err)
		return
	}
	c.Data(http.StatusOK, geoJSON, appendFeature(nil, f, false))
}

func (h *handler) delete(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	if err := h.svc.DeleteFence(c.Request.Context(), id, h.scope(c)); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// readFence reads and checks a geofence body, or ends the request.
func (h *handler) readFence(c *gin.Context) (FenceInput, bool) {
	body, err := readBody(c, h.o.MaxBodyBytes)
	if err != nil {
		httpx.Abort(c, err)
		return FenceInput{}, false
	}
	in, g, err := parseFence(body, h.o.Rules)
	if err != nil {
		httpx.Abort(c, err)
		return FenceInput{}, false
	}
	if h.o.CheckGeometry != nil {
		if err := h.o.CheckGeometry(c, g); err != nil {
			httpx.Abort(c, err)
			return FenceInput{}, false
		}
	}
	return in, true
}

func abortWrite(c *gin.Context, err error) {
	var ig *InvalidGeometryError
	if errors.As(err, &ig) {
		httpx.Abort(c, apperr.InvalidField("Invalid geometry: "+ig.Reason+".", "geometry_invalid", "body", "geometry"))
		return
	}
	httpx.Abort(c, err)
}

// readBody reads at most limit bytes of body; more is a 413.
func readBody(c *gin.Context, limit int) ([]byte, error) {
	tooLarge := apperr.Errorf(apperr.TooLarge, "Request body larger than %d bytes.", limit)
	if c.Request.ContentLength > int64(limit) {
		return nil, tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, int64(limit)))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, apperr.InvalidField("Could not read the request body.", "value_error", "body")
	}
	return b, nil
}

func (h *handler) contains(c *gin.Context) {
	p, err := parsePoint(c.Request.URL.Query())
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	if !h.check(c, p.Lng, p.Lat, 0) {
		return
	}
	fs, err := h.svc.Contains(c.Request.Context(), p)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	b := fmt.Appendf(nil, `{"point":[%s,%s],"fences":[`, num(p.Lng), num(p.Lat))
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"id":%d,"properties":`, f.ID)
		b = appendProps(b, f, nil)
		b = append(b, '}')
	}
	c.Data(http.StatusOK, "application/json", append(b, "]}"...))
}

func (h *handler) containsBatch(c *gin.Context) {
	body, err := readBody(c, h.o.MaxBodyBytes)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pts, err := parseBatch(body, h.o.Rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	for _, p := range pts {
		if !h.check(c, p.Lng, p.Lat, 0) {
			return
		}
	}
	ids, err := h.svc.ContainsBatch(c.Request.Context(), pts)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	b := append(make([]byte, 0, 64*len(pts)), `{"results":[`...)
	for i, p := range pts {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"point":[%s,%s],"fences":[`, num(p.Lng), num(p.Lat))
		for j, id := range ids[i] {
			if j > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, id, 10)
		}
		b = append(b, "]}"...)
	}
	c.Data(http.StatusOK, "application/json", append(b, "]}"...))
}

// collection renders a GeoJSON FeatureCollection with a next link.
func collection(fs []Feature, withDistance bool, next string) []byte {
	b := append(make([]byte, 0, 256*len(fs)+128), `{"type":"FeatureCollection","features":[`...)
	for i, f := range fs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFeature(b, f, withDistance)
	}
	b = append(b, `],"numberReturned":`...)
	b = strconv.AppendInt(b, int64(len(fs)), 10)
	b = append(b, `,"links":[`...)
	if next != "" {
		b = append(b, `{"rel":"next","type":"application/geo+json","href":`...)
		b = appendString(b, next)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func appendFeature(b []byte, f Feature, withDistance bool) []byte {
	b = append(b, `{"type":"Feature","id":`...)
	b = strconv.AppendInt(b, f.ID, 10)
	b = append(b, `,"geometry":`...)
	if len(f.Geometry) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, f.Geometry...)
	}
	b = append(b, `,"properties":`...)
	var dist *float64
	if withDistance {
		dist = &f.Distance
	}
	b = appendProps(b, f, dist)
	return append(b, '}')
}

// appendProps renders the stored properties (a JSON object without the
// name) merged with name and, when given, distance_m.
func appendProps(b []byte, f Feature, dist *float64) []byte {
	b = append(b, '{')
	if inner := trimObject(f.Props); len(inner) > 0 {
		b = append(b, inner...)
		b = append(b, ',')
	}
	b = append(b, `"name":`...)
	b = appendString(b, f.Name)
	if dist != nil {
		b = append(b, `,"distance_m":`...)
		b = strconv.AppendFloat(b, *dist, 'f', -1, 64)
	}
	return append(b, '}')
}

// trimObject returns the members of a JSON object without its braces.
func trimObject(obj []byte) []byte {
	i, j := 0, len(obj)
	for i < j && obj[i] != '{' {
		i++
	}
	for j > i && obj[j-1] != '}' {
		j--
	}
	if j-i < 2 {
		return nil
	}
	inner := obj[i+1 : j-1]
	for len(inner) > 0 && (inner[0] == ' ' || inner[0] == '\n') {
		inner = inner[1:]
	}
	return inner
}

// appendString appends s as a JSON string, leaving & < > as they are so
// that links stay readable.
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
