package ratelimit

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/httpx"
)

// caller names who a test request is limited as.
type caller func(r *http.Request) (identity, tier string)

// middleware limits a test route by policy as a handler asking Reserve
// does: cost prices the request (nil: 1), the decision's fields go on
// every answer, and a refusal is written by httpx.Abort.
func (l *Limiter) middleware(policy string, cost func(*gin.Context) int, who caller) gin.HandlerFunc {
	return func(c *gin.Context) {
		release, ok := l.admit(c, policy, costOf(c, cost), who)
		if !ok {
			return
		}
		defer release()
		c.Next()
	}
}

func costOf(c *gin.Context, cost func(*gin.Context) int) int {
	if cost == nil {
		return 1
	}
	return cost(c)
}

// admit reserves one request of c; ok false means it has answered.
func (l *Limiter) admit(c *gin.Context, policy string, cost int, who caller) (release func(), ok bool) {
	id, tier := who(c.Request)
	release, d, err := l.Reserve(c.Request.Context(), Request{Policy: policy, Identity: id, Tier: tier, Cost: cost})
	if err != nil {
		httpx.Abort(c, err)
		return nil, false
	}
	httpx.SetHeader(c, d.Header())
	return release, true
}
