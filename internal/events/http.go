package events

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/webhook"
)

// Handler serves positions, subscriptions and the pulled events.
type Handler struct {
	svc   *Service
	gate  Gate
	rules Rules
	hub   *Hub
}

// Gate is what the Handler asks of the service's gate (gate.Gate).
type Gate interface {
	Admit(ctx context.Context, a gate.Ask) (gate.Pass, error)
	Check(ctx context.Context, layer string) error
}

// Rules bound what a request may ask.
type Rules struct {
	MaxBodyBytes int64
	// SecretGrace is how long a rotated secret keeps signing.
	SecretGrace time.Duration
	// Webhooks say where a subscription's webhook may point.
	Webhooks webhook.Rules
	// Stream paces the live streams; zero values take the defaults.
	Stream StreamTiming
	// MaxStreams is how many live streams one identity may hold open on
	// a replica at once; 0 is no cap.
	MaxStreams int
}

// NewHandler returns the HTTP handlers of svc; hub wakes its live
// streams.
//
// The caller of each request is its identity (auth.FromContext): the
// owner of its devices and subscriptions (Identity.Owner), the part of
// the world it may reach.
func NewHandler(svc *Service, g Gate, r Rules, hub *Hub) *Handler {
	return &Handler{svc: svc, gate: g, rules: r, hub: hub}
}

var (
	errAnonymous       = apperr.New(apperr.Unauthenticated, "Devices and subscriptions belong to an identity: send an API key or a token.")
	errPositionOutside = apperr.New(apperr.Forbidden, "A position lies outside your spatial scope.")
	errTooLarge        = apperr.New(apperr.TooLarge, "The body is too large.")
)

// owner is the caller's owner id, or "" after answering 401.
func (h *Handler) owner(c *gin.Context) string {
	o := auth.FromContext(c.Request.Context()).Owner()
	if o == "" {
		c.Header("WWW-Authenticate", auth.Challenge)
		httpx.Abort(c, errAnonymous)
	}
	return o
}

// own admits a request about the caller's own devices or subscriptions,
// which reads no layer; ok false means it has answered.
func (h *Handler) own(c *gin.Context) (string, gate.Pass, bool) {
	owner := h.owner(c)
	if owner == "" {
		return "", nil, false
	}
	pass, ok := h.admit(c, gate.Ask{})
	return owner, pass, ok
}

// admit asks the gate for a; ok false means it has answered.
func (h *Handler) admit(c *gin.Context, a gate.Ask) (gate.Pass, bool) {
	p, err := h.gate.Admit(c.Request.Context(), a)
	return p, httpx.Admitted(c, p, err)
}

func (h *Handler) body(c *gin.Context) ([]byte, bool) {
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, h.rules.MaxBodyBytes))
	if err != nil {
		httpx.Abort(c, errTooLarge)
		return nil, false
	}
	return b, true
}

// Report serves POST /positions: one position or a batch, which costs
// what it holds.
func (h *Handler) Report(c *gin.Context) {
	owner := h.owner(c)
	if owner == "" {
		return
	}
	b, ok := h.body(c)
	if !ok {
		return
	}
	ps, err := parsePositions(b, h.svc.s.MaxBatch, time.Now(), h.svc.s.MaxSkew)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	scope := auth.ScopeOf(c.Request.Context())
	for _, p := range ps {
		if !scope.ContainsCircle(p.Lng, p.Lat, 0) {
			httpx.Abort(c, errPositionOutside)
			return
		}
	}
	pass, ok := h.admit(c, gate.Ask{Cost: len(ps)})
	if !ok {
		return
	}
	defer pass.Done()
	r, err := h.svc.Report(c.Request.Context(), owner, ps)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusAccepted, r)
}

// CreateSubscription serves POST /subscriptions.
func (h *Handler) CreateSubscription(c *gin.Context) {
	owner := h.owner(c)
	if owner == "" {
		return
	}
	b, ok := h.body(c)
	if !ok {
		return
	}
	sub, err := parseSubscription(b, Subscription{}, h.rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	pass, ok := h.admit(c, gate.Ask{Layers: []string{sub.Layer}})
	if !ok {
		return
	}
	defer pass.Done()
	out, err := h.svc.CreateSubscription(c.Request.Context(), owner, sub)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Header("Location", "/subscriptions/"+out.ID)
	c.JSON(http.StatusCreated, out)
}

// Subscriptions serves GET /subscriptions.
func (h *Handler) Subscriptions(c *gin.Context) {
	owner, pass, ok := h.own(c)
	if !ok {
		return
	}
	defer pass.Done()
	subs, err := h.svc.Subscriptions(c.Request.Context(), owner)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"subscriptions": subs})
}

// subscription is the caller's subscription id, once the gate has
// admitted the request (before the look-up, which it pays for) and the
// caller may still read the subscription's layer; ok false means it has
// answered.
func (h *Handler) subscription(c *gin.Context, id string) (string, Subscription, gate.Pass, bool) {
	owner, pass, ok := h.own(c)
	if !ok {
		return "", Subscription{}, nil, false
	}
	sub, err := h.svc.Subscription(c.Request.Context(), owner, id)
	if err == nil {
		err = h.gate.Check(c.Request.Context(), sub.Layer)
	}
	if err != nil {
		pass.Done()
		httpx.Abort(c, err)
		return "", Subscription{}, nil, false
	}
	return owner, sub, pass, true
}

// Subscription serves GET /subscriptions/{id}.
func (h *Handler) Subscription(c *gin.Context) {
	_, sub, pass, ok := h.subscription(c, c.Param("id"))
	if !ok {
		return
	}
	defer pass.Done()
	c.JSON(http.StatusOK, sub)
}

// UpdateSubscription serves PATCH /subscriptions/{id}: the fields sent
// replace the subscription's.
func (h *Handler) UpdateSubscription(c *gin.Context) {
	owner, sub, pass, ok := h.subscription(c, c.Param("id"))
	if !ok {
		return
	}
	defer pass.Done()
	b, ok := h.body(c)
	if !ok {
		return
	}
	next, err := parseSubscription(b, sub, h.rules)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	if next.Layer != sub.Layer {
		p2, ok := h.admit(c, gate.Ask{Layers: []string{next.Layer}, Policy: gate.Free})
		if !ok {
			return
		}
		defer p2.Done()
	}
	out, err := h.svc.UpdateSubscription(c.Request.Context(), owner, sub.ID, next)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// DeleteSubscription serves DELETE /subscriptions/{id}. Deleting needs no
// right on the layer: a caller whose layers were narrowed can still stop
// what it can no longer hear.
func (h *Handler) DeleteSubscription(c *gin.Context) {
	owner, pass, ok := h.own(c)
	if !ok {
		return
	}
	defer pass.Done()
	if err := h.svc.DeleteSubscription(c.Request.Context(), owner, c.Param("id")); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// RotateSecret serves POST /subscriptions/{id}/secret.
func (h *Handler) RotateSecret(c *gin.Context) {
	owner, sub, pass, ok := h.subscription(c, c.Param("id"))
	if !ok {
		return
	}
	defer pass.Done()
	out, err := h.svc.RotateSecret(c.Request.Context(), owner, sub.ID, h.rules.SecretGrace)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

var errNoSubscriptionParam = apperr.InvalidField("Field required: the id of one of your subscriptions.", "missing", "query", "subscription")

// Events serves GET /events?subscription=ID&after=N&limit=M: a page of
// the subscription's events after the cursor, and the cursor to go on
// from.
func (h *Handler) Events(c *gin.Context) {
	q := httpx.Query(c)
	after, limit, err := pageParams(q.Get("after"), q.Get("limit"), h.svc.s.MaxPage)
	if err == nil && q.Get("subscription") == "" {
		err = errNoSubscriptionParam
	}
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	owner, sub, pass, ok := h.subscription(c, q.Get("subscription"))
	if !ok {
		return
	}
	defer pass.Done()
	evs, next, err := h.svc.Events(c.Request.Context(), owner, sub.ID, after, limit)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"events": evs, "next": strconv.FormatInt(next, 10)})
}

// pageParams reads the after cursor (a number; "" is the beginning, -1)
// and the page size.
func pageParams(after, limit string, max int) (int64, int, error) {
	errs := &apperr.ValidationError{}
	a := int64(-1)
	if after != "" {
		var err error
		if a, err = strconv.ParseInt(after, 10, 64); err != nil || a < 0 {
			errs.Add("Must be a cursor from an earlier page's next, or omitted.", "value_error", "query", "after")
		}
	}
	return a, pageLimit(limit, max, errs), errs.Err()
}

// pageLimit reads the limit parameter, a page size from 1 to max ("" is
// 100, or max if less), adding its problem to errs.
func pageLimit(v string, max int, errs *apperr.ValidationError) int {
	if v == "" {
		return min(100, max)
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		errs.Add("Must be an integer from 1 to "+strconv.Itoa(max)+".", "value_error", "query", "limit")
	}
	return n
}

// Positions serves GET /positions?device=ID: a page of the device's
// recorded positions in time order, and the cursor to go on from.
func (h *Handler) Positions(c *gin.Context) {
	q, err := ParseTrackQuery(httpx.Query(c).Get, h.svc.s.MaxPage)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	owner, pass, ok := h.own(c)
	if !ok {
		return
	}
	defer pass.Done()
	ps, next, err := h.svc.Track(c.Request.Context(), owner, q)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	body := gin.H{"device": q.Device, "positions": ps, "next": nil}
	switch {
	case next != nil:
		body["next"] = next.String()
	case q.After != nil:
		body["next"] = q.After.String() // nothing newer yet: ask again from here
	}
	c.JSON(http.StatusOK, body)
}

// Devices serves GET /devices: a page of the caller's devices where they
// were last, by id, and the cursor to go on from (the last id; null on
// the last page).
func (h *Handler) Devices(c *gin.Context) {
	q := httpx.Query(c)
	errs := &apperr.ValidationError{}
	limit := pageLimit(q.Get("limit"), h.svc.s.MaxPage, errs)
	if err := errs.Err(); err != nil {
		httpx.Abort(c, err)
		return
	}
	owner, pass, ok := h.own(c)
	if !ok {
		return
	}
	defer pass.Done()
	ds, next, err := h.svc.Devices(c.Request.Context(), owner, q.Get("after"), limit)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	body := gin.H{"devices": ds, "next": nil}
	if next != "" {
		body["next"] = next
	}
	c.JSON(http.StatusOK, body)
}
