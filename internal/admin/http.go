package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/spatial"
)

// MaxBodyBytes bounds an admin request body; a polygon spatial scope is
// the only large thing one holds.
const MaxBodyBytes = 1 << 20

// Handler serves the /admin/ routes. The routes' scope check (the admin
// scope) comes before it.
type Handler struct {
	svc     *Service
	tallies Tallies
}

// Tallies reads what an identity did, per rate-limit policy and day
// (ratelimit.Limiter).
type Tallies interface {
	Tallies(ctx context.Context, identity string, days int) ([]ratelimit.DayTally, error)
	TallyDays() int
}

// NewHandler returns the HTTP handlers of svc; tallies (may be nil) serve
// the keys' usage.
func NewHandler(svc *Service, tallies Tallies) *Handler { return &Handler{svc: svc, tallies: tallies} }

// ActorOf is the caller of r: its identity and its client address.
func ActorOf(r *http.Request) Actor {
	id := auth.FromContext(r.Context())
	a := Actor{Kind: id.Kind, ID: id.ID}
	if addr := httpx.ClientOf(r).Addr; addr.IsValid() {
		a.Client = addr.Unmap().String()
	}
	if a.Kind == "" {
		a.Kind = auth.KindIP
	}
	return a
}

// View is a key as the admin API shows it: never its secret or a hash.
type View struct {
	ID                  string            `json:"id"`
	Status              string            `json:"status"`
	Notes               string            `json:"notes"`
	Scopes              []string          `json:"scopes"`
	Tier                *string           `json:"tier"`
	Account             *string           `json:"account"`
	DBRole              *string           `json:"db_role"`
	Claims              json.RawMessage   `json:"claims"`
	SpatialScope        json.RawMessage   `json:"spatial_scope"`
	SpatialScopeError   *string           `json:"spatial_scope_error"`
	Layers              []string          `json:"layers"`
	Overrides           map[string]string `json:"overrides"`
	CreatedAt           time.Time         `json:"created_at"`
	ExpiresAt           *time.Time        `json:"expires_at"`
	RevokedAt           *time.Time        `json:"revoked_at"`
	PreviousSecretUntil *time.Time        `json:"previous_secret_until"`
}

// ViewOf is k as shown at now.
func ViewOf(k auth.Key, now time.Time) View {
	v := View{
		ID: k.ID, Status: Status(k, now), Notes: k.Notes, Scopes: nonNil(k.Scopes), Tier: nullable(k.Tier),
		Account: nullable(k.Account), DBRole: nullable(k.DBRole), Claims: nullJSON(k.DBClaims), SpatialScope: k.SpatialJSON(), Layers: k.Layers, Overrides: k.Overrides, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, PreviousSecretUntil: k.PreviousSecretUntil,
	}
	if k.InvalidSpatial != nil {
		v.SpatialScopeError = &k.InvalidSpatial.Reason
	}
	return v
}

// Status is active, expired, revoked, or invalid_scope for a key refused
// because its stored spatial scope is invalid (see auth.InvalidScope).
func Status(k auth.Key, now time.Time) string {
	err := k.Usable(now)
	switch {
	case k.RevokedAt != nil && !k.RevokedAt.After(now):
		return "revoked"
	case errors.Is(err, auth.ErrStoredScopeInvalid):
		return "invalid_scope"
	case err != nil:
		return "expired"
	}
	return "active"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// withSecret is a View with the secret, answered once by create and
// rotate.
type withSecret struct {
	View
	Secret string `json:"secret"`
}

// List serves GET /admin/keys: every key, by id.
func (h *Handler) List(c *gin.Context) {
	keys, err := h.svc.List(c.Request.Context())
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	now := h.svc.now()
	views := make([]View, len(keys))
	for i, k := range keys {
		views[i] = ViewOf(k, now)
	}
	c.JSON(http.StatusOK, gin.H{"keys": views})
}

// Get serves GET /admin/keys/{id}.
func (h *Handler) Get(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	k, err := h.svc.Get(c.Request.Context(), id)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, ViewOf(k, h.svc.now()))
}

// Create serves POST /admin/keys: the new key and its secret, shown this
// once.
func (h *Handler) Create(c *gin.Context) {
	body, err := readBody(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	k, err := parseCreate(body)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	k, secret, err := h.svc.Create(c.Request.Context(), ActorOf(c.Request), auth.CreateOptions{Key: k})
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Header("Location", "/admin/keys/"+url.PathEscape(k.ID))
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, withSecret{View: ViewOf(k, h.svc.now()), Secret: secret})
}

// Update serves PATCH /admin/keys/{id}: the members present are set (null
// clears tier, spatial_scope, layers, expires_at and overrides), the
// others left as they are.
func (h *Handler) Update(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	body, err := readBody(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	ch, err := parseChange(body)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	k, err := h.svc.Update(c.Request.Context(), ActorOf(c.Request), id, ch)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, ViewOf(k, h.svc.now()))
}

// Revoke serves DELETE /admin/keys/{id}: the key, revoked; it stays
// listed.
func (h *Handler) Revoke(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	k, err := h.svc.Revoke(c.Request.Context(), ActorOf(c.Request), id)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, ViewOf(k, h.svc.now()))
}

// Rotate serves POST /admin/keys/{id}/rotate: the key and its new secret;
// the old one works for the grace period of the body ({"grace": "24h"},
// the default; no body is the default too).
func (h *Handler) Rotate(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	body, err := readBody(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	grace, err := parseRotate(body)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	k, secret, err := h.svc.Rotate(c.Request.Context(), ActorOf(c.Request), id, grace)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, withSecret{View: ViewOf(k, h.svc.now()), Secret: secret})
}

// Audit serves GET /admin/audit: entries newest first, key_id to keep one
// key's, limit per page, and a next link while older entries remain.
func (h *Handler) Audit(c *gin.Context) {
	q, err := parseAuditQuery(c.Request.URL.Query())
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	entries, more, err := h.svc.Audit(c.Request.Context(), q)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	out := gin.H{"entries": entries}
	if entries == nil {
		out["entries"] = []Entry{}
	}
	if more {
		v := c.Request.URL.Query()
		v.Set("before", strconv.FormatInt(entries[len(entries)-1].ID, 10))
		out["next"] = c.Request.URL.Path + "?" + v.Encode()
	}
	c.JSON(http.StatusOK, out)
}

func parseAuditQuery(v url.Values) (AuditQuery, error) {
	q := AuditQuery{Limit: DefaultAuditLimit}
	errs := &apperr.ValidationError{}
	if s := v.Get("key_id"); s != "" {
		if !auth.ValidKeyID(s) {
			errs.Add(apperr.MessageOf(auth.ErrBadKeyID), "string_pattern_mismatch", "query", "key_id")
		}
		q.KeyID = s
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxAuditLimit {
			errs.Add(fmt.Sprintf("Must be a whole number from 1 to %d.", MaxAuditLimit), "value_error", "query", "limit")
		}
		q.Limit = n
	}
	if s := v.Get("before"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			errs.Add("Must be the id of an entry, a positive whole number.", "value_error", "query", "before")
		}
		q.Before = n
	}
	return q, errs.Err()
}

// pathID is the id path parameter, or ends the request with a 422 when
// no key could have it.
func pathID(c *gin.Context) (string, bool) {
	id := c.Param("id")
	if !auth.ValidKeyID(id) {
		httpx.Abort(c, apperr.InvalidField(apperr.MessageOf(auth.ErrBadKeyID), "string_pattern_mismatch", "path", "id"))
		return "", false
	}
	return id, true
}

// readBody reads at most MaxBodyBytes of body; more is a 413.
func readBody(c *gin.Context) ([]byte, error) {
	tooLarge := apperr.Errorf(apperr.TooLarge, "Request body larger than %d bytes.", MaxBodyBytes)
	if c.Request.ContentLength > MaxBodyBytes {
		return nil, tooLarge
	}
	b, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, apperr.InvalidField("Could not read the request body.", "value_error", "body")
	}
	return b, nil
}

// members decodes a body that must be a JSON object whose member names
// are among allowed, exactly (no other letter case). An empty body is
// nil members when optional, else refused.
func members(body []byte, optional bool, allowed ...string) (map[string]json.RawMessage, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		if optional {
			return nil, nil
		}
		return nil, apperr.InvalidField("Body required: a JSON object.", "missing", "body")
	}
	var m map[string]json.RawMessage
	err := json.Unmarshal(body, &m)
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return nil, apperr.InvalidField(fmt.Sprintf("Malformed JSON at byte %d.", se.Offset), "json_invalid", "body")
	case err != nil || m == nil:
		return nil, apperr.InvalidField("Body must be a JSON object.", "model_type", "body")
	}
	errs := &apperr.ValidationError{}
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if !slices.Contains(allowed, name) {
			errs.Add("Unknown member.", "extra_forbidden", "body", name)
		}
	}
	return m, errs.Err()
}

// The members of each body.
var (
	changeMembers = []string{"notes", "scopes", "tier", "account", "db_role", "claims", "spatial_scope", "layers", "expires_at", "overrides"}
	createMembers = append([]string{"id"}, changeMembers...)
)

// parseCreate reads the body of POST /admin/keys.
func parseCreate(body []byte) (auth.Key, error) {
	m, err := members(body, false, createMembers...)
	if err != nil {
		return auth.Key{}, err
	}
	errs := &apperr.ValidationError{}
	var k auth.Key
	if raw, ok := m["id"]; ok {
		decode(raw, &k.ID, errs, "id")
	} else {
		errs.Add("Field required.", "missing", "body", "id")
	}
	if _, ok := m["scopes"]; !ok {
		errs.Add("Field required.", "missing", "body", "scopes")
	}
	ch := readChange(m, errs)
	if err := errs.Err(); err != nil {
		return auth.Key{}, err
	}
	id := k.ID
	k = apply(auth.Key{}, ch)
	k.ID = id
	return k, nil
}

// parseChange reads the body of PATCH /admin/keys/{id}.
func parseChange(body []byte) (Change, error) {
	m, err := members(body, false, changeMembers...)
	if err != nil {
		return Change{}, err
	}
	if len(m) == 0 {
		return Change{}, apperr.InvalidField(fmt.Sprintf("Nothing to change: name at least one of %v.", changeMembers), "missing", "body")
	}
	errs := &apperr.ValidationError{}
	ch := readChange(m, errs)
	return ch, errs.Err()
}

// parseRotate reads the body of POST /admin/keys/{id}/rotate.
func parseRotate(body []byte) (time.Duration, error) {
	m, err := members(body, true, "grace")
	if err != nil {
		return 0, err
	}
	raw, ok := m["grace"]
	if !ok || string(raw) == "null" {
		return DefaultGrace, nil
	}
	var s string
	errs := &apperr.ValidationError{}
	if !decode(raw, &s, errs, "grace") {
		return 0, errs
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, apperr.InvalidField("A duration such as 24h, 90m or 0s.", "value_error", "body", "grace")
	}
	return d, nil
}

// readChange reads the members of m that a key's fields take; the
// service checks their values.
func readChange(m map[string]json.RawMessage, errs *apperr.ValidationError) Change {
	var ch Change
	if raw, ok := m["notes"]; ok {
		ch.Notes.Set = decode(raw, &ch.Notes.V, errs, "notes")
	}
	if raw, ok := m["scopes"]; ok {
		ch.Scopes.Set = decode(raw, &ch.Scopes.V, errs, "scopes")
		if ch.Scopes.Set && ch.Scopes.V == nil {
			errs.Add("An array of scopes.", "list_type", "body", "scopes")
		}
	}
	if raw, ok := m["tier"]; ok {
		var t *string
		if ch.Tier.Set = decode(raw, &t, errs, "tier"); t != nil {
			if *t == "" {
				errs.Add("A tier name, or null for none.", "string_too_short", "body", "tier")
			}
			ch.Tier.V = *t
		}
	}
	if raw, ok := m["account"]; ok {
		var a *string
		if ch.Account.Set = decode(raw, &a, errs, "account"); a != nil {
			if *a == "" {
				errs.Add("An account name, or null for none.", "string_too_short", "body", "account")
			}
			ch.Account.V = *a
		}
	}
	if raw, ok := m["db_role"]; ok {
		var r *string
		if ch.DBRole.Set = decode(raw, &r, errs, "db_role"); r != nil {
			if *r == "" {
				errs.Add("A database role, or null for none.", "string_too_short", "body", "db_role")
			}
			ch.DBRole.V = *r
		}
	}
	if raw, ok := m["claims"]; ok {
		ch.DBClaims.Set = true
		if string(raw) != "null" {
			ch.DBClaims.V = raw
		}
	}
	if raw, ok := m["spatial_scope"]; ok {
		sp, err := spatial.Parse(raw)
		if err != nil {
			msg := "null (the whole world), [minLng, minLat, maxLng, maxLat], or a GeoJSON Polygon or MultiPolygon in WGS84 whose rings neither cross nor touch themselves or each other."
			if r := spatial.Reason(err); r != "" {
				msg += " This one: " + r + "."
			}
			errs.Add(msg, "value_error", "body", "spatial_scope")
		}
		ch.Spatial = Opt[*spatial.Scope]{Set: err == nil, V: sp}
	}
	if raw, ok := m["layers"]; ok {
		ch.Layers.Set = decode(raw, &ch.Layers.V, errs, "layers")
	}
	if raw, ok := m["expires_at"]; ok {
		var s *string
		if decode(raw, &s, errs, "expires_at") {
			ch.ExpiresAt.Set = true
			if s != nil {
				t, err := time.Parse(time.RFC3339Nano, *s)
				if err != nil {
					errs.Add("An RFC 3339 date-time such as 2030-01-31T12:00:00Z, or null for never.", "datetime_parsing", "body", "expires_at")
				}
				t = t.UTC()
				ch.ExpiresAt = Opt[*time.Time]{Set: err == nil, V: &t}
			}
		}
	}
	if raw, ok := m["overrides"]; ok {
		ch.Overrides.Set = decode(raw, &ch.Overrides.V, errs, "overrides")
	}
	return ch
}

// decode unmarshals raw into v, reporting a wrong type at body.name.
func decode(raw json.RawMessage, v any, errs *apperr.ValidationError, name string) bool {
	if err := json.Unmarshal(raw, v); err != nil {
		errs.Add("Wrong JSON type.", "type_error", "body", name)
		return false
	}
	return true
}

// nullJSON is raw, or JSON null for none.
func nullJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}
