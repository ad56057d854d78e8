package httpx

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
)

func TestAbortProblems(t *testing.T) {
	tests := []struct {
		name           string
		err            error
		wantStatus     int
		wantRetryAfter string
		wantType       string
		wantPolicies   []any
	}{
		{"ReducedCapacity", apperr.ReducedCapacity("Busy.", 1500*time.Millisecond, "fair-share"),
			503, "2", "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity", []any{"fair-share"}},
		{"QuotaExceeded", apperr.Limited("Too many.", "geofence"),
			429, "", "https://iana.org/assignments/http-problem-types#quota-exceeded", []any{"geofence"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c, _ := gin.CreateTestContext(w)
			c.Request = httptest.NewRequest("GET", "/within", nil)
			Abort(c, tt.err)
			if w.Code != tt.wantStatus {
				t.Errorf("Abort(%v) status = %d, want %d", tt.err, w.Code, tt.wantStatus)
			}
			if got := w.Header().Get("Retry-After"); got != tt.wantRetryAfter {
				t.Errorf("Abort(%v) Retry-After = %q, want %q", tt.err, got, tt.wantRetryAfter)
			}
			if got := w.Header().Get("Content-Type"); got != "application/problem+json" {
				t.Errorf("Abort(%v) Content-Type = %q, want application/problem+json", tt.err, got)
			}
			var body map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if body["type"] != tt.wantType {
				t.Errorf("Abort(%v) type = %v, want %s", tt.err, body["type"], tt.wantType)
			}
			if diff := cmp.Diff(tt.wantPolicies, body["violated-policies"]); diff != "" {
				t.Errorf("Abort(%v) violated-policies (-want +got):\n%s", tt.err, diff)
			}
			if body["detail"] != apperr.MessageOf(tt.err) {
				t.Errorf("Abort(%v) detail = %v, want %q", tt.err, body["detail"], apperr.MessageOf(tt.err))
			}
		})
	}
}
