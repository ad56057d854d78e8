package httpx

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"
)

// NewRouter returns a Gin engine with geogate's defaults: FastAPI-shaped
// 404 and 405 bodies, client addresses resolved through trusted, request
// ids, access logs, metrics, panic recovery and a 400 for a malformed
// query string (CheckQuery). metrics may be nil.
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
	r.Use(Recover(), CheckQuery())

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

// Guard serves h, answering 404 in the {"detail": ...} shape when routing
// itself panics. Gin 1.12 can overrun a fixed-size stack while it tries
// every other method's routes for a path that has none under the
// request's method (HandleMethodNotAllowed; gin-gonic/gin#4818). That
// panic comes before any middleware runs, Recover included, so without
// this net/http would drop the connection. Only routing can panic out of
// h: a handler's panic is caught by Recover inside it.
func Guard(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v) // net/http's own way to abort a response
			}
			log.Warn("routing failed; answered 404", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"detail":"Not Found"}` + "\n"))
		}()
		h.ServeHTTP(w, r)
	})
}
