package features

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/pg"
)

// Handler serves the OGC API – Features routes: it parses each request,
// asks the gate, and answers from the Service, which holds the caller to
// the layers and the part of the world it may read.
type Handler struct {
	svc       *Service
	publicURL string
	gate      Gate
	ahead     *ahead
}

// Access is what the Handler asks of the caller of each request: the
// gate that checks and charges it (nil: gate.Open()). The caller's
// spatial scope is the Service's (Rights), which cuts every answer to it.
type Access struct {
	Gate Gate
	// Registerer, when set, receives the metrics of the pages read
	// ahead.
	Registerer prometheus.Registerer
}

// Gate is what the Handler asks of the service's gate (gate.Gate).
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
	// CheckWrite returns the 403 for a layer the caller may not write,
	// the same whether it exists or not.
	CheckWrite(ctx context.Context, layer string) error
}

// NewHandler returns the HTTP handlers of svc under the public URL of s.
func NewHandler(svc *Service, s Settings, a Access) *Handler {
	if a.Gate == nil {
		a.Gate = gate.Open()
	}
	return &Handler{svc: svc, publicURL: s.PublicURL, gate: a.Gate, ahead: newAhead(s.PrefetchBytes, s.PrefetchKeep, a.Registerer)}
}

func (h *Handler) base(c *gin.Context) string { return httpx.BaseURL(c.Request, h.publicURL) }

// enter asks the gate for a request of the layers named (none: a
// document about the service) at cost; ok false means it has answered.
func (h *Handler) enter(c *gin.Context, cost int, layers ...string) (gate.Pass, bool) {
	return h.admit(c, gate.Ask{Layers: layers, Cost: cost})
}

// admit asks the gate for a once its layers are known to the caller: a
// layer the caller may not read, or that does not exist, is answered
// without reaching the gate, so that made-up ids cost the gate nothing
// and teach it nothing. ok false means it has answered.
func (h *Handler) admit(c *gin.Context, a gate.Ask) (gate.Pass, bool) {
	for _, l := range a.Layers {
		var err error
		if a.Write {
			// A refused write says it was a write, before the layer is
			// looked up, as a refused read does.
			err = h.gate.CheckWrite(c.Request.Context(), l)
		}
		if err == nil {
			err = h.svc.known(c.Request.Context(), l)
		}
		if err != nil {
			httpx.Abort(c, err)
			return nil, false
		}
	}
	p, err := h.gate.Admit(c.Request.Context(), a)
	return p, httpx.Admitted(c, p, err)
}

// Landing serves / : the landing document to a client asking for JSON,
// html (the map page) to a browser.
func (h *Handler) Landing(html gin.HandlerFunc) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, ok := h.enter(c, 1)
		if !ok {
			return
		}
		defer p.Done()
		if wantsHTML(c.Request) {
			html(c)
			return
		}
		if err := checkFormat(httpx.Query(c)); err != nil && httpx.Query(c).Get("f") != "html" {
			httpx.Abort(c, err)
			return
		}
		c.JSON(http.StatusOK, h.svc.landing(h.base(c)))
	}
}

// wantsHTML says a request is a browser's: f=html, or no f and an Accept
// header naming text/html.
func wantsHTML(r *http.Request) bool {
	switch r.URL.Query().Get("f") {
	case "html":
		return true
	case "":
		return strings.Contains(r.Header.Get("Accept"), typeHTML)
	}
	return false
}

// Conformance serves /conformance.
func (h *Handler) Conformance(c *gin.Context) {
	p, ok := h.enter(c, 1)
	if !ok {
		return
	}
	defer p.Done()
	if err := checkFormat(httpx.Query(c)); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"conformsTo": h.svc.conformsTo()})
}

// Collections serves /collections: every layer the caller may read.
func (h *Handler) Collections(c *gin.Context) {
	p, ok := h.enter(c, 1)
	if !ok {
		return
	}
	defer p.Done()
	if err := checkFormat(httpx.Query(c)); err != nil {
		httpx.Abort(c, err)
		return
	}
	base := h.base(c)
	c.JSON(http.StatusOK, gin.H{
		"links":       []Link{{Href: base + "/collections", Rel: "self", Type: typeJSON}},
		"collections": h.svc.collections(c.Request.Context(), base),
	})
}

// Collection serves /collections/{collectionId}.
func (h *Handler) Collection(c *gin.Context) {
	p, ok := h.enter(c, 1, c.Param("collectionId"))
	if !ok {
		return
	}
	defer p.Done()
	l, err := h.svc.layer(c.Request.Context(), c.Param("collectionId"))
	if err == nil {
		err = checkFormat(httpx.Query(c))
	}
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, h.svc.collectionDoc(c.Request.Context(), h.base(c), l.l))
}

// Queryables serves /collections/{collectionId}/queryables.
func (h *Handler) Queryables(c *gin.Context) {
	p, ok := h.enter(c, 1, c.Param("collectionId"))
	if !ok {
		return
	}
	defer p.Done()
	l, err := h.svc.layer(c.Request.Context(), c.Param("collectionId"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	writeJSON(c, schemaType(c.Request), h.svc.queryablesDoc(h.base(c), l))
}

// Schema serves /collections/{collectionId}/schema.
func (h *Handler) Schema(c *gin.Context) {
	p, ok := h.enter(c, 1, c.Param("collectionId"))
	if !ok {
		return
	}
	defer p.Done()
	l, err := h.svc.layer(c.Request.Context(), c.Param("collectionId"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	writeJSON(c, schemaType(c.Request), h.svc.schemaDoc(h.base(c), l))
}

// schemaType is application/schema+json, or plain JSON for a client that
// asks for it and not for the former (GDAL before 3.7 checks).
func schemaType(r *http.Request) string {
	a := r.Header.Get("Accept")
	if strings.Contains(a, typeJSON) && !strings.Contains(a, typeSchema) {
		return typeJSON
	}
	return typeSchema
}

func writeJSON(c *gin.Context, typ string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Data(http.StatusOK, typ, b)
}

// Items serves /collections/{collectionId}/items as a GeoJSON
// FeatureCollection with OGC API's counts and links.
func (h *Handler) Items(c *gin.Context) {
	v := httpx.Query(c)
	id := c.Param("collectionId")
	pass, ok := h.admit(c, gate.Ask{Layers: []string{id}, Cost: h.pageCost(v), Size: h.pageSize(v)})
	if !ok {
		return
	}
	defer pass.Done()
	caller, key, walking := h.walk(c, id, v)
	if walking && h.serveAhead(c, pass, caller, key, id, v) {
		return
	}
	w := httpx.NewAnswer(c, typeGeoJSON)
	w.WriteString(itemsStart)
	budget := h.svc.maxPageBytes()
	begin := func(crs CRS) {
		w.Header = func() {
			setContentCRS(c, crs)
			httpx.SetHeader(c, pass.Header())
		}
	}
	n := 0
	p, err := h.svc.items(c.Request.Context(), id, v, begin, func(f Feature) (bool, error) {
		if n > 0 {
			w.WriteByte(',')
		}
		n++
		writeFeature(w, f)
		return w.Written() >= budget, w.Err()
	})
	if err != nil {
		pass.Spent(gate.Usage{Bytes: w.Written()})
		w.Fail(err)
		return
	}
	// Before the answer ends, so that the client cannot ask for the next
	// page before it is known as a walk's.
	h.readAhead(c, caller, id, v, p, walking)
	h.endPage(c, w, pass, id, v, p)
}

// walk names the caller and the request for the pages read ahead, and
// says whether the request follows a next link given out to the caller
// moments ago; caller is "" while nothing is read ahead.
func (h *Handler) walk(c *gin.Context, id string, v url.Values) (caller, key string, walking bool) {
	if h.ahead.max <= 0 {
		return "", "", false
	}
	caller = auth.FromContext(c.Request.Context()).LimitKey()
	if dc := pg.CallerOf(c.Request.Context()); dc != nil {
		// A page read as the caller's role and claims is served only
		// while they are the same: the rows are theirs.
		caller += "\x00" + dc.Role + "\x00" + dc.Claims
	}
	if !v.Has("cursor") {
		return caller, "", false
	}
	key = walkKey(caller, id, v.Encode())
	return caller, key, h.ahead.walking(key)
}

// serveAhead answers with the page of key read ahead, if there is one
// and it may be served (see serveEarly); false when the request must
// read its page itself.
func (h *Handler) serveAhead(c *gin.Context, pass gate.Pass, caller, key, id string, v url.Values) bool {
	e := h.ahead.take(c.Request.Context(), key)
	if e == nil {
		return false
	}
	defer h.ahead.release(e)
	return h.serveEarly(c, pass, caller, id, v, e)
}

// itemsStart opens every items answer.
const itemsStart = `{"type":"FeatureCollection","features":[`

// endPage writes what follows the features of page p, charges the
// request and sends the answer.
func (h *Handler) endPage(c *gin.Context, w *httpx.Answer, pass gate.Pass, id string, v url.Values, p Page) {
	base := h.base(c)
	href := base + "/collections/" + id + "/items"
	links := []Link{
		{Href: withQuery(href, v, ""), Rel: "self", Type: typeGeoJSON, Title: "This page"},
		{Href: base + "/collections/" + id, Rel: "collection", Type: typeJSON, Title: "The collection"},
	}
	if p.Cursor != "" {
		links = append(links, Link{Href: withQuery(href, v, p.Cursor), Rel: "next", Type: typeGeoJSON, Title: "The next page"})
	}
	w.WriteString(`]`)
	if p.Matched != Unknown {
		w.WriteString(`,"numberMatched":`)
		w.WriteString(strconv.FormatInt(p.Matched, 10))
	}
	w.WriteString(`,"numberReturned":`)
	w.WriteString(strconv.Itoa(p.Returned))
	w.WriteString(`,"timeStamp":"`)
	w.WriteString(time.Now().UTC().Format(time.RFC3339))
	w.WriteString(`","links":`)
	lj, _ := json.Marshal(links)
	w.Write(lj)
	w.WriteByte('}')
	pass.Spent(gate.Usage{Cost: gate.PageCost(p.Returned, w.Written()), Bytes: w.Written()})
	if !w.Committed() {
		pass.Settle() // the answer is whole: its headers show the budget as settled
	}
	w.Finish()
}

// serveEarly answers with the page e read ahead, once the layer is shown
// to be at the version the page was read at, and charges its database
// time to this request, the one that asked for it. False when it cannot
// (the read failed, or the layer changed since): the request then reads
// its page itself.
func (h *Handler) serveEarly(c *gin.Context, pass gate.Pass, caller, id string, v url.Values, e *early) bool {
	if e.err != nil {
		h.ahead.m.count("failed")
		return false
	}
	ctx := c.Request.Context()
	// The request as it is checked now: a caller whose scope changed
	// since the page was read holds a cursor bound to the former one.
	if _, err := h.svc.checkItems(ctx, id, v); err != nil {
		h.ahead.m.count("failed")
		return false
	}
	now, err := h.svc.dataVersion(ctx, id)
	if err != nil || now != e.version {
		h.ahead.m.count("stale")
		return false
	}
	pg.MeterOf(ctx).Add(e.db)
	w := httpx.NewAnswer(c, typeGeoJSON)
	w.Header = func() {
		setContentCRS(c, e.crs)
		httpx.SetHeader(c, pass.Header())
	}
	w.Write(e.body)
	h.readAhead(c, caller, id, v, e.page, true)
	h.endPage(c, w, pass, id, v, e.page)
	h.ahead.m.count("served")
	return true
}

// readAhead hands out the next link of page p and, for a client walking
// the pages, starts reading the page it leads to. That read runs as the
// caller's (the fair queue orders it among the caller's calls), apart from
// the request, which it outlives.
func (h *Handler) readAhead(c *gin.Context, caller, id string, v url.Values, p Page, walking bool) {
	if p.Cursor == "" || h.ahead.max <= 0 {
		return
	}
	next := withCursor(v, p.Cursor)
	key := walkKey(caller, id, next.Encode())
	h.ahead.handOut(key)
	ctx := c.Request.Context()
	// Read ahead only into a database with room: under a crowd the page
	// would take a slot from work someone has asked for.
	if !walking || h.svc.busy() || !h.svc.versioned(ctx, id) {
		return
	}
	bg := context.WithoutCancel(ctx)
	h.ahead.start(caller, key, func(e *early) { h.readEarly(bg, id, next, e) })
}

// readEarly reads the page of collection id that v asks for into e,
// written as the request would write it, with the layer's data version.
func (h *Handler) readEarly(ctx context.Context, id string, v url.Values, e *early) {
	ctx, m := pg.WithMeter(ctx)
	budget := h.svc.maxPageBytes()
	var buf bytes.Buffer
	buf.WriteString(itemsStart)
	n, counted := 0, 0
	e.page, e.err = h.svc.readItems(ctx, id, v, func(crs CRS) { e.crs = crs }, func(f Feature) (bool, error) {
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		writeFeature(&buf, f)
		if !h.ahead.grow(e, buf.Len()-counted) {
			return false, errTooBig
		}
		counted = buf.Len()
		return buf.Len() >= budget, nil
	}, &e.version)
	e.body, e.db = buf.Bytes(), m.DB()
}

// withQuery is href with v's parameters, cursor replaced.
func withQuery(href string, v url.Values, cursor string) string {
	q := withCursor(v, cursor)
	if len(q) == 0 {
		return href
	}
	return href + "?" + q.Encode()
}

// withCursor is a copy of v with cursor in place of its own ("" none).
func withCursor(v url.Values, cursor string) url.Values {
	q := url.Values{}
	for k, vals := range v {
		if k != "cursor" {
			q[k] = vals
		}
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	return q
}

// setContentCRS names the CRS of an answer's coordinates; an answer in a
// local CRS (SRID 0) names none.
func setContentCRS(c *gin.Context, crs CRS) {
	if crs.URI != "" {
		c.Header("Content-Crs", contentCRS(crs))
	}
}

func writeFeature(b featureWriter, f Feature) {
	b.WriteString(`{"type":"Feature","id":`)
	b.Write(f.ID)
	b.WriteString(`,"geometry":`)
	if len(f.Geometry) == 0 {
		b.WriteString("null")
	} else {
		b.Write(f.Geometry)
	}
	b.WriteString(`,"properties":`)
	b.Write(f.Properties)
	b.WriteByte('}')
}

// featureWriter is what writeFeature writes to: a bytes.Buffer or an
// httpx.Answer.
type featureWriter interface {
	Write(p []byte) (int, error)
	WriteString(s string) (int, error)
	WriteByte(b byte) error
}

// Item serves /collections/{collectionId}/items/{featureId}, with an ETag
// of its content so that clients can revalidate it.
func (h *Handler) Item(c *gin.Context) {
	id, fid := c.Param("collectionId"), c.Param("featureId")
	pass, ok := h.enter(c, 1, id)
	if !ok {
		return
	}
	defer pass.Done()
	f, crs, err := h.svc.item(c.Request.Context(), id, fid, httpx.Query(c))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	var b bytes.Buffer
	writeFeature(&b, f)
	body := b.Bytes()
	base := h.base(c)
	links, _ := json.Marshal([]Link{
		{Href: base + "/collections/" + id + "/items/" + url.PathEscape(fid), Rel: "self", Type: typeGeoJSON},
		{Href: base + "/collections/" + id, Rel: "collection", Type: typeJSON},
	})
	body = append(append(append(body[:len(body)-1], `,"links":`...), links...), '}')
	// The row's version, then the representation's: a write's If-Match
	// is held to the first part, a cache's If-None-Match to both.
	sum := sha256.Sum256(append([]byte(crs.URI+"\x00"), body...))
	etag := `"` + string(f.Version) + "-" + hex.EncodeToString(sum[:6]) + `"`
	c.Header("ETag", etag)
	setContentCRS(c, crs)
	if inm := c.GetHeader("If-None-Match"); inm != "" && (inm == etag || inm == "*" || strings.Contains(inm, etag)) {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, typeGeoJSON, body)
}

// pageSize names what makes one items request cost more database time
// than another of the same layer, for the estimates learned from them:
// its page size, whether it counts what matches (the first page does),
// and whether a bbox or a filter narrows it.
func (h *Handler) pageSize(v url.Values) string {
	size := strconv.Itoa(h.pageCost(v))
	if v.Get("cursor") != "" {
		size += "+next"
	}
	if v.Get("bbox") != "" {
		size += "+bbox"
	}
	for k := range v {
		if !plainParams[k] {
			size += "+filter"
			break
		}
	}
	return size
}

// plainParams are the items parameters that neither filter nor narrow.
var plainParams = map[string]bool{"limit": true, "cursor": true, "bbox": true, "f": true, "crs": true, "bbox-crs": true}

// pageCost is what an items request reserves of its caller's features
// budget: one unit per 100 features it may return (its limit); once
// answered it is charged for what it returned (gate.PageCost).
func (h *Handler) pageCost(v url.Values) int {
	def, most := h.svc.Limits()
	n, err := parseLimit(v.Get("limit"), def, most)
	if err != nil {
		return 1 // the handler refuses it
	}
	return gate.PageEstimate(n)
}

// CreateItem serves POST /collections/{collectionId}/items (OGC API
// Features Part 4): 201 with the new feature's Location and ETag.
func (h *Handler) CreateItem(c *gin.Context) {
	id := c.Param("collectionId")
	pass, body, err, ok := h.admitWrite(c, id)
	if !ok {
		return
	}
	defer pass.Done()
	if err == nil {
		var w written
		if w, err = h.svc.create(c.Request.Context(), id, body); err == nil {
			h.wrote(c, pass, http.StatusCreated, w.Version, h.base(c)+"/collections/"+id+"/items/"+url.PathEscape(w.ID))
			return
		}
	}
	httpx.Abort(c, err)
}

// admitWrite admits a write of a feature of layer id and reads its body
// (err says why it cannot be read); ok false means it has answered.
func (h *Handler) admitWrite(c *gin.Context, id string) (pass gate.Pass, body []byte, err error, ok bool) {
	if pass, ok = h.admit(c, gate.Ask{Layers: []string{id}, Write: true}); !ok {
		return nil, nil, nil, false
	}
	body, err = readBody(c.Request.Body)
	return pass, body, err, true
}

// ReplaceItem serves PUT /collections/{collectionId}/items/{featureId}.
func (h *Handler) ReplaceItem(c *gin.Context) { h.writeItem(c, false) }

// UpdateItem serves PATCH /collections/{collectionId}/items/{featureId}
// with a JSON merge patch of the feature.
func (h *Handler) UpdateItem(c *gin.Context) { h.writeItem(c, true) }

// writeItem replaces or patches a feature: 204 with its new ETag, 412
// when If-Match names another version than the feature's.
func (h *Handler) writeItem(c *gin.Context, patch bool) {
	id, fid := c.Param("collectionId"), c.Param("featureId")
	pass, body, err, ok := h.admitWrite(c, id)
	if !ok {
		return
	}
	defer pass.Done()
	if err == nil {
		var w written
		if w, err = h.svc.replace(c.Request.Context(), id, fid, body, patch, parseIfMatch(c.GetHeader("If-Match"))); err == nil {
			h.wrote(c, pass, http.StatusNoContent, w.Version, "")
			return
		}
	}
	httpx.Abort(c, err)
}

// DeleteItem serves DELETE /collections/{collectionId}/items/{featureId}:
// 204, or 412 when If-Match names another version than the feature's.
func (h *Handler) DeleteItem(c *gin.Context) {
	id, fid := c.Param("collectionId"), c.Param("featureId")
	pass, ok := h.admit(c, gate.Ask{Layers: []string{id}, Write: true})
	if !ok {
		return
	}
	defer pass.Done()
	if err := h.svc.remove(c.Request.Context(), id, fid, parseIfMatch(c.GetHeader("If-Match"))); err != nil {
		httpx.Abort(c, err)
		return
	}
	h.wrote(c, pass, http.StatusNoContent, "", "")
}

// wrote answers a write that has committed, once the layer's new data
// version is published: status, with the feature's ETag at version and
// its location, each when there is one.
func (h *Handler) wrote(c *gin.Context, pass gate.Pass, status int, version, location string) {
	h.svc.committed(c.Request.Context())
	httpx.SetHeader(c, pass.Header())
	if location != "" {
		c.Header("Location", location)
	}
	if version != "" {
		c.Header("ETag", etagOf(version))
	}
	c.Status(status)
}
