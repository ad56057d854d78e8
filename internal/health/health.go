// Package health serves liveness and readiness: /healthz says the process
// is alive, /readyz that every dependency answers.
package health

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/gin-gonic/gin"
)

// Check reports whether one dependency answers.
type Check func(ctx context.Context) error

// Register adds /healthz and /readyz. Each check gets timeout to answer.
// While draining reports true (the process is shutting down), /readyz is
// 503 whatever the checks say, so that load balancers stop sending new
// requests before the listener closes. draining may be nil.
func Register(r gin.IRouter, timeout time.Duration, checks map[string]Check, draining func() bool) {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)

	r.GET("/healthz", func(c *gin.Context) {
		c.JSON(http.StatusOK, gin.H{"status": "ok"})
	})
	r.GET("/readyz", func(c *gin.Context) {
		if draining != nil && draining() {
			c.JSON(http.StatusServiceUnavailable, gin.H{"detail": "Not ready: shutting down."})
			return
		}
		status := map[string]string{}
		var failing []string
		for _, n := range names {
			ctx, cancel := context.WithTimeout(c.Request.Context(), timeout)
			err := checks[n](ctx)
			cancel()
			if err != nil {
				status[n] = "unavailable"
				failing = append(failing, n)
				continue
			}
			status[n] = "ok"
		}
		if len(failing) > 0 {
			c.JSON(http.StatusServiceUnavailable, gin.H{
				"detail": "Not ready: " + joinNames(failing) + " unavailable.",
				"checks": status,
			})
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ok", "checks": status})
	})
}

func joinNames(ns []string) string {
	out := ""
	for i, n := range ns {
		if i > 0 {
			out += ", "
		}
		out += n
	}
	return out
}
