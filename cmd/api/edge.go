package main

import (
	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/freshness"
	"github.com/geogate/geogate/internal/gate"
	"github.com/geogate/geogate/internal/httpx"
)

// The router's links between Gin and the rooms that decide without it:
// each asks its room and lets httpx write a refusal.

// authenticate puts each request's caller in its context.
func authenticate(a *auth.Authenticator) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, err := a.Admit(c.Request)
		if err != nil {
			httpx.Abort(c, err)
			return
		}
		c.Request = c.Request.WithContext(ctx)
		httpx.AddLogAttrs(c, "identity", auth.FromContext(ctx).LimitKey())
		c.Next()
	}
}

// requireScope lets through the callers that hold scope.
func requireScope(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := auth.Allow(c.Request.Context(), c.Request, scope); err != nil {
			httpx.Abort(c, err)
			return
		}
		c.Next()
	}
}

// gated marks each request of route name as spending s, and has the gate
// report a handler that answered it without asking.
func gated(g *gate.Gate, name string, s gate.Spend) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, rt := gate.WithRoute(c.Request.Context(), name, s)
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		g.Finish(rt, c.Writer.Status())
	}
}

// readFloor lets the reads of each request that may go to a replica find
// its caller's read floor (freshness.Floors.Reads).
func readFloor(f *freshness.Floors) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Request = c.Request.WithContext(f.Reads(c.Request.Context()))
		c.Next()
	}
}
