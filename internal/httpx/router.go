package httpx

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// NewRouter returns a Gin engine with geogate's defaults: FastAPI-shaped
// 404 and 405 bodies, request ids, access logs, metrics and panic recovery.
// metrics may be nil.
func NewRouter(log *slog.Logger, metrics *Metrics) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.ContextWithFallback = true
	// Client addresses come from the connection until trusted proxies are
	// configured; never from headers a client can invent.
	_ = r.SetTrustedProxies(nil)

	r.Use(RequestID(log), AccessLog(), SecurityHeaders())
	if metrics != nil {
		r.Use(metrics.Middleware())
	}
	r.Use(Recover())

	r.NoRoute(func(c *gin.Context) {
		AbortStatus(c, http.StatusNotFound, "Not Found")
	})
	r.NoMethod(func(c *gin.Context) {
		AbortStatus(c, http.StatusMethodNotAllowed, "Method Not Allowed")
	})
	return r
}
