package delivery

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/outbox"
)

// Handler serves the /admin/dead-letters routes. The routes' scope check
// (the admin scope) comes before it.
type Handler struct {
	dead *outbox.DeadLetters
}

// NewHandler returns the HTTP handlers of dead.
func NewHandler(dead *outbox.DeadLetters) *Handler { return &Handler{dead: dead} }

// List serves GET /admin/dead-letters: oldest first, subscription to keep
// one subscription's, limit per page, and a next link while more remain.
func (h *Handler) List(c *gin.Context) {
	q, err := parseDeadQuery(c.Request.URL.Query())
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	page, more, err := h.dead.List(c.Request.Context(), q)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	out := gin.H{"dead_letters": page}
	if more {
		v := c.Request.URL.Query()
		v.Set("after", strconv.FormatInt(page[len(page)-1].Seq, 10))
		out["next"] = c.Request.URL.Path + "?" + v.Encode()
	}
	c.JSON(http.StatusOK, out)
}

// Replay serves POST /admin/dead-letters/{id}/replay.
func (h *Handler) Replay(c *gin.Context) {
	if err := h.dead.Replay(c.Request.Context(), c.Param("id")); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// Drop serves DELETE /admin/dead-letters/{id}.
func (h *Handler) Drop(c *gin.Context) {
	if err := h.dead.Drop(c.Request.Context(), c.Param("id")); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func parseDeadQuery(v url.Values) (outbox.DeadQuery, error) {
	q := outbox.DeadQuery{Limit: outbox.DefaultDeadLimit}
	errs := &apperr.ValidationError{}
	if s := v.Get("subscription"); s != "" {
		if !outbox.ValidID(s) {
			errs.Add("Must be a subscription's id, a UUID.", "uuid_parsing", "query", "subscription")
		}
		q.Subscription = s
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > outbox.MaxDeadLimit {
			errs.Add("Must be a whole number from 1 to "+strconv.Itoa(outbox.MaxDeadLimit)+".", "value_error", "query", "limit")
		}
		q.Limit = n
	}
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 1 {
			errs.Add("Must be a dead letter's seq, a positive whole number.", "value_error", "query", "after")
		}
		q.After = n
	}
	return q, errs.Err()
}
