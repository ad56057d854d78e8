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
		c.String(http.StatusOK, auth.LimitKey(c))
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

// Handlers check the spatial scope before they query.
func ExampleSpatialScope_ContainsBBox() {
	scope, _ := auth.ParseSpatialScope([]byte(`[13,52,14,53]`))
	for _, tile := range [][4]float64{{13.2, 52.2, 13.4, 52.4}, {13.9, 52.9, 14.1, 53.1}, {15, 52, 16, 53}} {
		switch {
		case scope.ContainsBBox(tile[0], tile[1], tile[2], tile[3]):
			fmt.Println("inside: shared cache")
		case scope.IntersectsBBox(tile[0], tile[1], tile[2], tile[3]):
			fmt.Println("straddles: filter")
		default:
			fmt.Println("outside: refuse with", auth.ErrTileOutsideScope.Message)
		}
	}
	// Output:
	// inside: shared cache
	// straddles: filter
	// outside: refuse with The tile lies outside your spatial scope.
}
