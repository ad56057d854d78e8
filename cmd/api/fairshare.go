package main

import (
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/fairshare"
	"github.com/geogate/geogate/internal/peer"
	"github.com/geogate/geogate/internal/pg"
)

// newFairQueue returns the queue every query and tile render enters, its
// metrics registered with reg; nil (no queue) when DB_FAIR_SHARE is off.
func newFairQueue(f config.FairShare, reg prometheus.Registerer) pg.Queue {
	if !f.On {
		return nil // a nil *fairshare.Queue in the interface would not be
	}
	q := fairshare.New(f.Settings)
	q.Register(reg)
	return q
}

// fairCaller names the request's caller to the fair queue: the identity
// it is rate limited as, grouped as DB_FAIR_IDENTITY says (the keys of
// one account, anonymous callers of one network), weighted by its tier,
// and the work it does.
func fairCaller(s fairshare.Settings) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx := c.Request.Context()
		id := auth.FromContext(ctx)
		name := s.Group.Name(fairshare.Caller{Key: id.LimitKey(), Account: id.Account, Tier: id.Tier,
			Anonymous: id.Anonymous, Addr: peer.Of(c.Request).Addr})
		ctx = fairshare.WithCaller(ctx, name, s.Weight(id.Tier))
		// The route is the work whose pace the queue compares (see
		// fairshare.WithWork).
		ctx = fairshare.WithWork(ctx, c.Request.Method+" "+c.FullPath())
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// meterDB gives the request a meter of the database time its statements
// take (pg.Runner adds to it), which the gate settles, and room for the
// caller they run as on layers that run as their caller, which the gate
// fills at admission.
func meterDB(c *gin.Context) {
	ctx, _ := pg.WithMeter(c.Request.Context())
	c.Request = c.Request.WithContext(pg.WithCallerSlot(ctx))
	c.Next()
}
