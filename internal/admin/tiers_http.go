package admin

import (
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
	"github.com/geogate/geogate/internal/ratelimit"
)

// ListTiers serves GET /admin/tiers: every tier with overrides.
func (h *Handler) ListTiers(c *gin.Context) {
	tiers, err := h.svc.Tiers(c.Request.Context())
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	if tiers == nil {
		tiers = []Tier{}
	}
	c.JSON(http.StatusOK, gin.H{"tiers": tiers})
}

// GetTier serves GET /admin/tiers/{tier}.
func (h *Handler) GetTier(c *gin.Context) {
	t, err := h.svc.Tier(c.Request.Context(), c.Param("tier"))
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

// PutTier serves PUT /admin/tiers/{tier}: {"overrides": {policy: windows}}
// replaces the tier's overrides; an empty object removes them.
func (h *Handler) PutTier(c *gin.Context) {
	if err := validTier(c.Param("tier")); err != nil {
		httpx.Abort(c, err)
		return
	}
	body, err := readBody(c)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	m, err := members(body, false, "overrides")
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	raw, ok := m["overrides"]
	if !ok {
		httpx.Abort(c, apperr.InvalidField("Field required.", "missing", "body", "overrides"))
		return
	}
	var o map[string]string
	errs := &apperr.ValidationError{}
	if decode(raw, &o, errs, "overrides"); errs.Err() != nil {
		httpx.Abort(c, errs.Err())
		return
	}
	t, err := h.svc.SetTier(c.Request.Context(), ActorOf(c.Request), c.Param("tier"), o)
	if err != nil {
		httpx.Abort(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

// DeleteTier serves DELETE /admin/tiers/{tier}.
func (h *Handler) DeleteTier(c *gin.Context) {
	if err := h.svc.DeleteTier(c.Request.Context(), ActorOf(c.Request), c.Param("tier")); err != nil {
		httpx.Abort(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// Usage serves GET /admin/keys/{id}/usage: the key's admitted and refused
// requests per policy and UTC day, today first, for the last days days
// (default and most: the days tallies are kept, plus today).
func (h *Handler) Usage(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	if _, err := h.svc.Get(c.Request.Context(), id); err != nil {
		httpx.Abort(c, err)
		return
	}
	kept := 0
	if h.tallies != nil {
		kept = h.tallies.TallyDays()
	}
	days := kept + 1
	if s := c.Query("days"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > days {
			httpx.Abort(c, apperr.InvalidField("Must be a whole number from 1 to "+strconv.Itoa(days)+
				" (tallies are kept kept_days days after their day).", "value_error", "query", "days"))
			return
		}
		days = n
	}
	out := []gin.H{}
	if kept > 0 {
		identity := auth.Identity{Kind: auth.KindKey, ID: id}.LimitKey()
		ts, err := h.tallies.Tallies(c.Request.Context(), identity, days)
		if err != nil {
			httpx.Abort(c, apperr.Wrap(apperr.Unavailable, "Usage cannot be read while Redis is unavailable.", err))
			return
		}
		for _, t := range ts {
			unit := "requests"
			if t.Unit == ratelimit.DBTime {
				unit = "db-ms"
			}
			out = append(out, gin.H{"day": t.Day, "policy": t.Policy, "admitted": t.Admitted, "refused": t.Refused, "spent": t.Spent, "unit": unit})
		}
	}
	c.JSON(http.StatusOK, gin.H{"key_id": id, "days": days, "kept_days": kept,
		"as_of": time.Now().UTC().Format(time.RFC3339), "usage": out})
}
