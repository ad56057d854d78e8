// Package health serves liveness and readiness: /healthz says the process
// is alive, /readyz that every dependency answers.
package health

import (
	"context"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
)

// Check reports whether one dependency answers.
type Check func(ctx context.Context) error

// Handler answers the health routes.
type Handler struct {
	timeout  time.Duration
	checks   map[string]Check
	names    []string
	draining func() bool
	info     map[string]func() any
}

// Also adds name to every /readyz answer, valued f(): a dependency that
// does not decide readiness (a replica: reads move to the primary while
// it is away) but whose state an operator wants to see.
func (h *Handler) Also(name string, f func() any) {
	if h.info == nil {
		h.info = map[string]func() any{}
	}
	h.info[name] = f
}

// New returns the health handlers. Each check gets timeout to answer.
// While draining reports true (the process is shutting down), Ready is 503
// whatever the checks say, so that load balancers stop sending new
// requests before the listener closes. draining may be nil.
func New(timeout time.Duration, checks map[string]Check, draining func() bool) *Handler {
	names := make([]string, 0, len(checks))
	for n := range checks {
		names = append(names, n)
	}
	sort.Strings(names)
	if draining == nil {
		draining = func() bool { return false }
	}
	return &Handler{timeout: timeout, checks: checks, names: names, draining: draining}
}

// Live serves /healthz: 200 while the process runs.
func (h *Handler) Live(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// Ready serves /readyz: 200 when every dependency answers, else 503
// naming those that do not.
func (h *Handler) Ready(c *gin.Context) {
	if h.draining() {
		c.JSON(http.StatusServiceUnavailable, gin.H{"detail": "Not ready: shutting down."})
		return
	}
	status := map[string]string{}
	var failing []string
	for _, n := range h.names {
		ctx, cancel := context.WithTimeout(c.Request.Context(), h.timeout)
		err := h.checks[n](ctx)
		cancel()
		if err != nil {
			status[n] = "unavailable"
			failing = append(failing, n)
			continue
		}
		status[n] = "ok"
	}
	body := gin.H{"status": "ok", "checks": status}
	for name, f := range h.info {
		body[name] = f()
	}
	if len(failing) > 0 {
		delete(body, "status")
		body["detail"] = "Not ready: " + strings.Join(failing, ", ") + " unavailable."
		c.JSON(http.StatusServiceUnavailable, body)
		return
	}
	c.JSON(http.StatusOK, body)
}
