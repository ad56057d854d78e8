package httpx

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// The fence routes' shape, on which Gin 1.12's search for another
// method's route overruns its stack for /geofences/contains/.
func fenceRoutes() *gin.Engine {
	r := NewRouter(slog.New(slog.NewTextHandler(io.Discard, nil)), nil, TrustedProxies{})
	ok := func(c *gin.Context) { c.Status(http.StatusOK) }
	r.GET("/within", ok)
	r.GET("/geofences", ok)
	r.POST("/geofences", ok)
	r.GET("/geofences/contains", ok)
	r.POST("/geofences/contains", ok)
	r.PUT("/geofences/contains", MethodNotAllowed("GET, POST"))
	r.DELETE("/geofences/contains", MethodNotAllowed("GET, POST"))
	r.GET("/geofences/:id", ok)
	r.PUT("/geofences/:id", ok)
	r.DELETE("/geofences/:id", ok)
	return r
}

func TestGuardAnswersWhenRoutingPanics(t *testing.T) {
	h := Guard(fenceRoutes(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/geofences/contains/", http.StatusNotFound},
		{"PUT", "/geofences/contains/", http.StatusNotFound},
		{"DELETE", "/geofences/contains/", http.StatusNotFound},
		{"PATCH", "/geofences/7", http.StatusMethodNotAllowed},
		{"GET", "/geofences/7", http.StatusOK},
	}
	for _, tc := range tests {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(tc.method, tc.path, nil))
		if w.Code != tc.want {
			t.Errorf("%s %s = %d %s, want %d", tc.method, tc.path, w.Code, w.Body, tc.want)
		}
		if tc.want >= 400 && w.Body.Len() > 0 && w.Body.String()[:10] != `{"detail":` {
			t.Errorf("%s %s body = %s, want {\"detail\": ...}", tc.method, tc.path, w.Body)
		}
	}
}
