package auth_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/gin-gonic/gin"

	"github.com/geogate/geogate/internal/auth"
)

// Routes name their scope with Require; the middleware has already put
// the caller's identity into the request.
func ExampleRequire() {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(auth.NewAuthenticator(auth.Options{AnonymousScopes: auth.ReadScopes}).Middleware())
	r.GET("/within", auth.Require(auth.ScopeProximityRead), func(c *gin.Context) {
		c.String(http.StatusOK, auth.FromContext(c.Request.Context()).LimitKey())
	})
	r.POST("/geofences", auth.Require(auth.ScopeGeofencesWrite), func(c *gin.Context) {})

	for _, req := range []*http.Request{
		httptest.NewRequest("GET", "/within", nil),
		httptest.NewRequest("POST", "/geofences", nil),
	} {
		req.RemoteAddr = "[2001:db8:1:2::7]:50000"
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(req.Method, req.URL.Path, w.Code, w.Body.String())
	}
	// Output:
	// GET /within 200 ip:2001:db8:1:2::/64
	// POST /geofences 401 {"detail":"Authentication required: send an API key in the x-api-key header or a bearer token in the Authorization header."}
}
