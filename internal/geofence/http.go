package geofence

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
)

// Handler serves /within and the geofence routes: it parses and checks
// each request, holds it to the caller's spatial scope and answers from the
// Service.
type Handler struct {
	svc     *Service
	rules   Rules
	cursors *Cursors
	gate    Gate
}

// Access is what the Handler asks of each request: the gate that checks
// and charges it (nil: gate.Open()). The part of the world the caller
// may reach is its identity's (auth.ScopeOf).
type Access struct {
	Gate Gate
}

// Gate is what the Handler asks of the service's gate (gate.Gate).
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
	Check(ctx context.Context, layer string) error
}

// FenceLayer is the layer id of the stored fences, which every fence
// route reads or writes.
const FenceLayer = "geofences"

// NewHandler returns the HTTP handlers of svc under the rules and cursor
// key of s.
func NewHandler(svc *Service, s Settings, a Access) *Handler {
	if a.Gate == nil {
		a.Gate = gate.Open()
	}
	return &Handler{svc: svc, rules: s.Rules, cursors: NewCursors(s.CursorKey), gate: a.Gate}
}

// enter asks the gate for a request of layer at cost, once the layer a
// read names is known to the caller: a layer it may not read, or that
// does not exist, is answered without reaching the gate, so that made-up
// ids cost the gate nothing and teach it nothing. ok false means it has
// answered.
func (h *Handler) enter(c *gin.Context, layer string, write bool, cost int, size string) (gate.Pass, bool) {
	ctx := c.Request.Context()
	if !write {
		err := h.gate.Check(ctx, layer)
		if err == nil {
			_, err = h.svc.layer(layer)
		}
		if err != nil {
			httpx.Abort(c, err)
			return nil, false
		}
	}
	p, err := h.gate.Admit(ctx, gate.Ask{Layers: []string{layer}, Write: write, Cost: cost, Size: size})
	return p, httpx.Admitted(c, p, err)
}

// orFences is layer, or the fence layer for "" (the built-in fences).
func orFences(layer string) string {
	if layer == "" {
		return FenceLayer
	}
	return layer
}

// Errors of a request that reaches outside the caller's spatial scope.
var (
	errCircleOutsideScope   = apperr.New(apperr.Forbidden, "The query circle leaves your spatial scope: the whole circle must lie inside it.")
	errPointOutsideScope    = apperr.New(apperr.Forbidden, "The point lies outside your spatial scope.")
	errGeometryOutsideScope = apperr.New(apperr.Forbidden, "The geometry leaves your spatial scope: all of it must lie inside.")
)

const geoJSON = "application/geo+json"

// Within serves GET /within: the features of a layer within a radius of a
// point, nearest first, paged by cursor.
func (h *Handler) Within(c *gin.Context) {
	q, err := parseWithin(httpx.Query(c), h.rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, q.Layer, false, RadiusCost(q.Radius), "")
	if !ok {
		return
	}
	defer pass.Done()
	scope := withinScope(q.WithinQuery)
	if q.Cursor != "" {
		pos, err := h.cursors.Decode(scope, q.Cursor)
		if err != nil {
			httpx.Abort(c, badCursor())
			return
		}
		q.After = &pos
	}
	if !h.check(c, q.Lng, q.Lat, q.Radius) {
		return
	}
	q.Scope = h.scopeWKB(c)
	// Features go out as their rows arrive, each written from the row's
	// bytes; a page up to 64 KiB (most) is sent whole once settled.
	w := httpx.NewAnswer(c, geoJSON)
	w.Header = func() { httpx.SetHeader(c, pass.Header()) }
	w.WriteString(collectionStart)
	var scratch []byte
	n := 0
	next, err := h.svc.WithinRows(c.Request.Context(), q.WithinQuery, func(f Feature) error {
		if n > 0 {
			w.WriteByte(',')
		}
		n++
		scratch = appendFeature(scratch[:0], f, true)
		w.Write(scratch)
		return w.Err()
	})
	if err != nil {
		pass.Spent(gate.Usage{Bytes: w.Written()})
		w.Fail(err)
		return
	}
	link := ""
	if next != nil {
		link = nextLink(c.Request.URL, h.cursors.Encode(scope, *next))
	}
	w.Write(appendCollectionEnd(scratch[:0], n, link))
	pass.Spent(gate.Usage{Bytes: w.Written()})
	if !w.Committed() {
		pass.Settle() // the answer is whole: its headers show the budget as settled
	}
	w.Finish()
}

func badCursor() error {
	return apperr.InvalidField("Invalid or expired cursor: use the link of a previous page of the same query.", "value_error", "query", "cursor")
}

// scopeWKB is the caller's spatial scope as WKB, nil for the world.
func (h *Handler) scopeWKB(c *gin.Context) []byte { return auth.ScopeOf(c.Request.Context()).WKB() }

// check refuses, with a 403, a circle (a point has radius 0) that leaves
// the caller's spatial scope, calling a point a point.
func (h *Handler) check(c *gin.Context, lng, lat, r float64) bool {
	if auth.ScopeOf(c.Request.Context()).ContainsCircle(lng, lat, r) {
		return true
	}
	err := errCircleOutsideScope
	if r == 0 {
		err = errPointOutsideScope
	}
	httpx.Abort(c, err)
	return false
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

// List serves GET /geofences: a page of fences by id, optionally only
// those meeting a bbox. It costs one request of the route's policy,
// whatever its page size; its size is paid from the database budget,
// which is charged what its statements took and its bytes: a page of
// fences with megabytes of properties costs more than one of small
// fences.
func (h *Handler) List(c *gin.Context) {
	q, err := parseList(httpx.Query(c), h.rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, FenceLayer, false, 1, "limit"+strconv.Itoa(gate.PageEstimate(q.Limit)))
	if !ok {
		return
	}
	defer pass.Done()
	scope := listScope(q.ListQuery)
	if q.Cursor != "" {
		pos, err := h.cursors.Decode(scope, q.Cursor)
		if err != nil {
			httpx.Abort(c, badCursor())
			return
		}
		q.AfterID = pos.ID
	}
	q.Scope = h.scopeWKB(c)
	// Fences go out as their rows arrive, as /within's features do.
	w := httpx.NewAnswer(c, geoJSON)
	w.Header = func() { httpx.SetHeader(c, pass.Header()) }
	w.WriteString(collectionStart)
	var scratch []byte
	n, last := 0, int64(0)
	more, err := h.svc.ListFenceRows(c.Request.Context(), q.ListQuery, func(f Feature) error {
		if n > 0 {
			w.WriteByte(',')
		}
		n, last = n+1, f.ID
		scratch = appendFeature(scratch[:0], f, false)
		w.Write(scratch)
		return w.Err()
	})
	if err != nil {
		pass.Spent(gate.Usage{Bytes: w.Written()})
		w.Fail(err)
		return
	}
	link := ""
	if more {
		link = nextLink(c.Request.URL, h.cursors.Encode(scope, Position{ID: last}))
	}
	w.Write(appendCollectionEnd(scratch[:0], n, link))
	pass.Spent(gate.Usage{Bytes: w.Written()})
	if !w.Committed() {
		pass.Settle() // the answer is whole: its headers show the budget as settled
	}
	w.Finish()
}

// Get serves GET /geofences/{id}.
func (h *Handler) Get(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, FenceLayer, false, 1, "")
	if !ok {
		return
	}
	defer pass.Done()
	f, err := h.svc.GetFence(c.Request.Context(), id, h.scopeWKB(c))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Data(http.StatusOK, geoJSON, appendFeature(nil, f, false))
}

// Create serves POST /geofences.
func (h *Handler) Create(c *gin.Context) {
	pass, ok := h.enter(c, FenceLayer, true, 1, "")
	if !ok {
		return
	}
	defer pass.Done()
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

// Update serves PUT /geofences/{id}.
func (h *Handler) Update(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, FenceLayer, true, 1, "")
	if !ok {
		return
	}
	defer pass.Done()
	in, ok := h.readFence(c)
	if !ok {
		return
	}
	f, err := h.svc.UpdateFence(c.Request.Context(), id, in, h.scopeWKB(c))
	if err != nil {
		abortWrite(c, err)
		return
	}
	c.Data(http.StatusOK, geoJSON, appendFeature(nil, f, false))
}

// Delete serves DELETE /geofences/{id}.
func (h *Handler) Delete(c *gin.Context) {
	id, err := parseID(c.Param("id"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, FenceLayer, true, 1, "")
	if !ok {
		return
	}
	defer pass.Done()
	if err := h.svc.DeleteFence(c.Request.Context(), id, h.scopeWKB(c)); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// readFence reads and checks a geofence body, or ends the request.
func (h *Handler) readFence(c *gin.Context) (FenceInput, bool) {
	body, err := readBody(c, h.rules.MaxBodyBytes)
	if err != nil {
		httpx.Abort(c, err)
		return FenceInput{}, false
	}
	in, g, err := parseFence(body, h.rules)
	if err != nil {
		httpx.Abort(c, err)
		return FenceInput{}, false
	}
	if !auth.ScopeOf(c.Request.Context()).ContainsGeometry(g) {
		httpx.Abort(c, errGeometryOutsideScope)
		return FenceInput{}, false
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

// Contains serves GET /geofences/contains: the fences, or the features of
// a polygon layer, holding a point.
func (h *Handler) Contains(c *gin.Context) {
	p, layer, err := parseContains(httpx.Query(c))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, orFences(layer), false, 1, "")
	if !ok {
		return
	}
	defer pass.Done()
	if !h.check(c, p.Lng, p.Lat, 0) {
		return
	}
	// Fences go out as their rows arrive, as /within's features do.
	w := httpx.NewAnswer(c, "application/json")
	w.Header = func() { httpx.SetHeader(c, pass.Header()) }
	b := fmt.Appendf(nil, `{"point":[%s,%s],"fences":[`, num(p.Lng), num(p.Lat))
	w.Write(b)
	n := 0
	cut, err := h.svc.ContainsRows(c.Request.Context(), layer, p, h.rules.MaxPageBytes, func(f Feature) error {
		b = b[:0]
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = append(b, `{"id":`...)
		if f.Key != nil {
			b = append(b, f.Key...)
		} else {
			b = strconv.AppendInt(b, f.ID, 10)
		}
		b = append(b, `,"properties":`...)
		b = appendProps(b, f, nil)
		w.Write(append(b, '}'))
		return w.Err()
	})
	if err != nil {
		pass.Spent(gate.Usage{Bytes: w.Written()})
		w.Fail(err)
		return
	}
	b = append(b[:0], ']')
	if cut {
		b = append(b, `,"truncated":true`...)
	}
	w.Write(append(b, '}'))
	pass.Spent(gate.Usage{Bytes: w.Written()})
	if !w.Committed() {
		pass.Settle() // the answer is whole: its headers show the budget as settled
	}
	w.Finish()
}

// ContainsBatch serves POST /geofences/contains: for each point of a
// batch, the ids of the fences, or of the features of a polygon layer,
// holding it.
func (h *Handler) ContainsBatch(c *gin.Context) {
	layer, err := parseLayer(httpx.Query(c))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.enter(c, orFences(layer), false, 1, "")
	if !ok {
		return
	}
	defer pass.Done()
	body, err := readBody(c, h.rules.MaxBodyBytes)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pts, err := parseBatch(body, h.rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	for _, p := range pts {
		if !h.check(c, p.Lng, p.Lat, 0) {
			return
		}
	}
	ids, err := h.svc.ContainsBatch(c.Request.Context(), layer, pts)
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
			b = append(b, id...)
		}
		b = append(b, "]}"...)
	}
	b = append(b, "]}"...)
	pass.Spent(gate.Usage{Bytes: len(b)})
	pass.Settle() // the answer is whole: its headers show the budget as settled
	httpx.SetHeader(c, pass.Header())
	c.Data(http.StatusOK, "application/json", b)
}

// collectionStart opens a FeatureCollection of features.
const collectionStart = `{"type":"FeatureCollection","features":[`

// appendCollectionEnd closes a FeatureCollection of n features, with the
// link to its next page, if any.
func appendCollectionEnd(b []byte, n int, next string) []byte {
	b = append(b, `],"numberReturned":`...)
	b = strconv.AppendInt(b, int64(n), 10)
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
	if f.Key != nil {
		b = append(b, f.Key...)
	} else {
		b = strconv.AppendInt(b, f.ID, 10)
	}
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

// appendProps renders the properties (a JSON object without the name)
// merged with the name, unless the feature has none of its own, and, when
// given, distance_m.
func appendProps(b []byte, f Feature, dist *float64) []byte {
	b = append(b, '{')
	inner := trimObject(f.Props)
	b = append(b, inner...)
	more := len(inner) > 0
	if !f.NoName {
		if more {
			b = append(b, ',')
		}
		b = append(b, `"name":`...)
		b = appendString(b, f.Name)
		more = true
	}
	if dist != nil {
		if more {
			b = append(b, ',')
		}
		b = append(b, `"distance_m":`...)
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

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
