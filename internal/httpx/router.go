package httpx

import (
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// NewRouter returns a Gin engine with geogate's defaults: FastAPI-shaped
// 404 and 405 bodies, client addresses resolved through trusted, request
// ids, access logs, metrics and panic recovery. metrics may be nil.
func NewRouter(log *slog.Logger, metrics *Metrics, trusted TrustedProxies) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	r.ContextWithFallback = true
	// Gin's own ClientIP is never asked; ClientAddress is the one
	// resolver, and Gin is told to trust no header.
	_ = r.SetTrustedProxies(nil)

	r.Use(ClientAddress(trusted), RequestID(log), AccessLog(), SecurityHeaders())
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

// MethodNotAllowed answers 405 naming allow in the Allow header, as the
// router does for a method a path lacks; for a path that a parameter route
// would otherwise take (PUT /geofences/contains is no fence called
// "contains").
func MethodNotAllowed(allow string) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Header("Allow", allow)
		AbortStatus(c, http.StatusMethodNotAllowed, "Method Not Allowed")
	}
}
