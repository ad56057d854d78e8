package admin

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
)

// testRouter serves h's routes as cmd/api does, for a caller who is the
// API key ops (the scope check is the router's, tested there).
func testRouter(h *Handler) *gin.Engine {
	r := httpx.NewRouter(slog.New(slog.DiscardHandler), nil, httpx.TrustedProxies{})
	r.Use(func(c *gin.Context) {
		id := auth.Identity{Kind: auth.KindKey, ID: "ops", Scopes: []string{auth.ScopeAdmin}}
		c.Request = c.Request.WithContext(auth.WithIdentity(c.Request.Context(), id))
	})
	r.POST("/admin/keys", h.Create)
	r.GET("/admin/keys", h.List)
	r.GET("/admin/keys/:id", h.Get)
	r.PATCH("/admin/keys/:id", h.Update)
	r.DELETE("/admin/keys/:id", h.Revoke)
	r.POST("/admin/keys/:id/rotate", h.Rotate)
	r.GET("/admin/audit", h.Audit)
	return r
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func send(t *testing.T, h http.Handler, method, path, body string) answer {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.RemoteAddr = "198.51.100.9:4000"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	a := answer{status: w.Code, header: w.Header(), raw: w.Body.String()}
	_ = json.Unmarshal(w.Body.Bytes(), &a.body)
	return a
}

// TestHandlerWalk drives one key through every route and checks what
// each answers: a secret only from create and rotate, never a hash.
func TestHandlerWalk(t *testing.T) {
	s, _ := newService(t, "geofence")
	r := testRouter(NewHandler(s, nil))
	created := send(t, r, "POST", "/admin/keys", `{"id":"acme","scopes":["tiles:read"],"tier":"gold","account":"acme-corp","notes":"n",
		"spatial_scope":[13,52,14,53],"layers":["roads"],"expires_at":"2999-01-01T00:00:00Z","overrides":{"geofence":"10/1s"}}`)
	if created.status != http.StatusCreated {
		t.Fatalf("POST /admin/keys = %d %s, want 201", created.status, created.raw)
	}
	secret, _ := created.body["secret"].(string)
	if !strings.HasPrefix(secret, "gg_acme_") || created.header.Get("Location") != "/admin/keys/acme" {
		t.Errorf("created: secret %q, Location %q; want a gg_acme_ secret at /admin/keys/acme", secret, created.header.Get("Location"))
	}
	want := map[string]any{
		"id": "acme", "status": "active", "notes": "n", "scopes": []any{"tiles:read"}, "tier": "gold", "account": "acme-corp", "db_role": nil, "claims": nil,
		"spatial_scope": []any{13.0, 52.0, 14.0, 53.0}, "spatial_scope_error": nil, "layers": []any{"roads"}, "overrides": map[string]any{"geofence": "10/1s"},
		"expires_at": "2999-01-01T00:00:00Z", "revoked_at": nil, "previous_secret_until": nil,
	}
	got := send(t, r, "GET", "/admin/keys/acme", "")
	delete(got.body, "created_at")
	if diff := cmp.Diff(want, got.body); diff != "" {
		t.Errorf("GET /admin/keys/acme (-want +got):\n%s", diff)
	}

	patched := send(t, r, "PATCH", "/admin/keys/acme", `{"tier":null,"layers":null,"scopes":["tiles:read","admin"]}`)
	if patched.status != http.StatusOK || patched.body["tier"] != nil || patched.body["layers"] != nil || len(patched.body["scopes"].([]any)) != 2 {
		t.Errorf("PATCH = %d %s, want tier and layers cleared, two scopes", patched.status, patched.raw)
	}
	rotated := send(t, r, "POST", "/admin/keys/acme/rotate", `{"grace":"1h"}`)
	if s2, _ := rotated.body["secret"].(string); rotated.status != http.StatusOK || s2 == "" || s2 == secret || rotated.body["previous_secret_until"] == nil {
		t.Errorf("rotate = %d %s, want a new secret and previous_secret_until", rotated.status, rotated.raw)
	}
	if rotated := send(t, r, "POST", "/admin/keys/acme/rotate", ""); rotated.status != http.StatusOK {
		t.Errorf("rotate without a body = %d %s, want 200", rotated.status, rotated.raw)
	}
	revoked := send(t, r, "DELETE", "/admin/keys/acme", "")
	if revoked.status != http.StatusOK || revoked.body["status"] != "revoked" || revoked.body["revoked_at"] == nil {
		t.Errorf("DELETE = %d %s, want the key, revoked", revoked.status, revoked.raw)
	}
	list := send(t, r, "GET", "/admin/keys", "")
	if keys, _ := list.body["keys"].([]any); list.status != http.StatusOK || len(keys) != 1 {
		t.Errorf("GET /admin/keys = %d %s, want the one key", list.status, list.raw)
	}
	for _, a := range []answer{got, patched, revoked, list} {
		if strings.Contains(a.raw, "secret\"") || strings.Contains(a.raw, "hash") {
			t.Errorf("an answer that should not show secrets: %s", a.raw)
		}
	}

	audit := send(t, r, "GET", "/admin/audit?key_id=acme&limit=2", "")
	entries, _ := audit.body["entries"].([]any)
	if audit.status != http.StatusOK || len(entries) != 2 || audit.body["next"] == nil {
		t.Fatalf("GET /admin/audit = %d %s, want 2 entries and a next link", audit.status, audit.raw)
	}
	newest := entries[0].(map[string]any)
	if diff := cmp.Diff(map[string]any{"kind": "key", "id": "ops"}, newest["actor"]); diff != "" || newest["action"] != "revoke" || newest["client"] != "198.51.100.9" {
		t.Errorf("newest entry %v: want a revoke by key ops from 198.51.100.9 %s", newest, diff)
	}
	next := send(t, r, "GET", audit.body["next"].(string), "")
	if entries, _ := next.body["entries"].([]any); next.status != http.StatusOK || len(entries) != 2 {
		t.Errorf("next page = %d %s, want 2 entries", next.status, next.raw)
	}
	if strings.Contains(audit.raw+next.raw, secret) {
		t.Errorf("the audit trail shows a secret")
	}
}

// TestHandlerRefusals: bad input is a 422 naming where, an unknown key a
// 404, a revoked key's rotation a 409.
func TestHandlerRefusals(t *testing.T) {
	s, _ := newService(t, "geofence")
	r := testRouter(NewHandler(s, nil))
	if a := send(t, r, "POST", "/admin/keys", `{"id":"k","scopes":["admin"]}`); a.status != http.StatusCreated {
		t.Fatalf("create = %d %s", a.status, a.raw)
	}
	if a := send(t, r, "POST", "/admin/keys", `{"id":"gone","scopes":["admin"]}`); a.status != http.StatusCreated {
		t.Fatalf("create = %d %s", a.status, a.raw)
	}
	send(t, r, "DELETE", "/admin/keys/gone", "")
	for _, tc := range []struct {
		name, method, path, body string
		wantStatus               int
		wantLoc                  []any
	}{
		{"CreateNoBody", "POST", "/admin/keys", "", 422, []any{"body"}},
		{"CreateNotJSON", "POST", "/admin/keys", `{"id":`, 422, []any{"body"}},
		{"CreateArray", "POST", "/admin/keys", `[]`, 422, []any{"body"}},
		{"CreateNoID", "POST", "/admin/keys", `{"scopes":["admin"]}`, 422, []any{"body", "id"}},
		{"CreateNoScopes", "POST", "/admin/keys", `{"id":"x"}`, 422, []any{"body", "scopes"}},
		{"CreateUnknownMember", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"secret":"mine"}`, 422, []any{"body", "secret"}},
		{"CreateMemberCase", "POST", "/admin/keys", `{"id":"x","Scopes":["admin"]}`, 422, []any{"body", "Scopes"}},
		{"CreateBadID", "POST", "/admin/keys", `{"id":"a b","scopes":["admin"]}`, 422, []any{"body", "id"}},
		{"CreateIDNotString", "POST", "/admin/keys", `{"id":7,"scopes":["admin"]}`, 422, []any{"body", "id"}},
		{"CreateScopesNull", "POST", "/admin/keys", `{"id":"x","scopes":null}`, 422, []any{"body", "scopes"}},
		{"CreateUnknownScope", "POST", "/admin/keys", `{"id":"x","scopes":["root"]}`, 422, []any{"body", "scopes", 0.0}},
		{"CreateBadSpatial", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"spatial_scope":[1,2,3]}`, 422, []any{"body", "spatial_scope"}},
		{"CreateSelfIntersectingSpatial", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"spatial_scope":{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}}`, 422, []any{"body", "spatial_scope"}},
		{"CreateHoleOutsideShellSpatial", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"spatial_scope":{"type":"Polygon","coordinates":[[[0,0],[4,0],[4,4],[0,4],[0,0]],[[5,5],[6,5],[6,6],[5,6],[5,5]]]}}`, 422, []any{"body", "spatial_scope"}},
		{"CreateNestedSpatial", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"spatial_scope":{"type":"MultiPolygon","coordinates":[[[[0,0],[4,0],[4,4],[0,4],[0,0]]],[[[1,1],[2,1],[2,2],[1,2],[1,1]]]]}}`, 422, []any{"body", "spatial_scope"}},
		{"PatchSelfIntersectingSpatial", "PATCH", "/admin/keys/k", `{"spatial_scope":{"type":"Polygon","coordinates":[[[0,0],[2,2],[2,0],[0,2],[0,0]]]}}`, 422, []any{"body", "spatial_scope"}},
		{"CreateBadExpiry", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"expires_at":"tomorrow"}`, 422, []any{"body", "expires_at"}},
		{"CreateEmptyAccount", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"account":""}`, 422, []any{"body", "account"}},
		{"CreateBadAccount", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"account":"-acme corp"}`, 422, []any{"body", "account"}},
		{"CreatePastExpiry", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"expires_at":"2001-01-01T00:00:00Z"}`, 422, []any{"body", "expires_at"}},
		{"CreateEmptyTier", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"tier":""}`, 422, []any{"body", "tier"}},
		{"CreateBadOverrides", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"overrides":{"geofence":"lots"}}`, 422, []any{"body", "overrides", "geofence"}},
		{"CreateOverridesNotStrings", "POST", "/admin/keys", `{"id":"x","scopes":["admin"],"overrides":{"geofence":10}}`, 422, []any{"body", "overrides"}},
		{"CreateExists", "POST", "/admin/keys", `{"id":"k","scopes":["admin"]}`, 409, nil},
		{"GetMissing", "GET", "/admin/keys/missing", "", 404, nil},
		{"GetBadID", "GET", "/admin/keys/a%20b", "", 422, []any{"path", "id"}},
		{"PatchEmpty", "PATCH", "/admin/keys/k", `{}`, 422, []any{"body"}},
		{"PatchID", "PATCH", "/admin/keys/k", `{"id":"other"}`, 422, []any{"body", "id"}},
		{"PatchNoScopes", "PATCH", "/admin/keys/k", `{"scopes":[]}`, 422, []any{"body", "scopes"}},
		{"PatchMissing", "PATCH", "/admin/keys/missing", `{"notes":"x"}`, 404, nil},
		{"RevokeMissing", "DELETE", "/admin/keys/missing", "", 404, nil},
		{"RotateMissing", "POST", "/admin/keys/missing/rotate", "", 404, nil},
		{"RotateRevoked", "POST", "/admin/keys/gone/rotate", "", 409, nil},
		{"RotateBadGrace", "POST", "/admin/keys/k/rotate", `{"grace":"a day"}`, 422, []any{"body", "grace"}},
		{"RotateLongGrace", "POST", "/admin/keys/k/rotate", `{"grace":"169h"}`, 422, []any{"body", "grace"}},
		{"RotateUnknownMember", "POST", "/admin/keys/k/rotate", `{"grace":"1h","now":true}`, 422, []any{"body", "now"}},
		{"AuditBadLimit", "GET", "/admin/audit?limit=0", "", 422, []any{"query", "limit"}},
		{"AuditBadBefore", "GET", "/admin/audit?before=x", "", 422, []any{"query", "before"}},
		{"AuditBadKey", "GET", "/admin/audit?key_id=a%20b", "", 422, []any{"query", "key_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, r, tc.method, tc.path, tc.body)
			if a.status != tc.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tc.method, tc.path, a.status, a.raw, tc.wantStatus)
			}
			if tc.wantLoc == nil {
				if _, ok := a.body["detail"].(string); !ok {
					t.Errorf("body %s, want {\"detail\": string}", a.raw)
				}
				return
			}
			detail, _ := a.body["detail"].([]any)
			if len(detail) == 0 {
				t.Fatalf("body %s, want a list of problems", a.raw)
			}
			if diff := cmp.Diff(tc.wantLoc, detail[0].(map[string]any)["loc"]); diff != "" {
				t.Errorf("loc (-want +got):\n%s", diff)
			}
		})
	}
}

// TestInvalidStoredScope: a key whose stored spatial scope is invalid (a
// row from before scopes were checked) is listed with that scope, status
// invalid_scope and the reason; changing something else keeps the scope
// as stored; replacing the scope makes the key active again.
func TestInvalidStoredScope(t *testing.T) {
	s, _ := newService(t, "geofence")
	r := testRouter(NewHandler(s, nil))
	if a := send(t, r, "POST", "/admin/keys", `{"id":"old","scopes":["tiles:read"]}`); a.status != http.StatusCreated {
		t.Fatalf("create = %d %s", a.status, a.raw)
	}
	hole := `{"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 4], [0, 0]], [[5, 5], [6, 5], [6, 6], [5, 6], [5, 5]]]}`
	if _, err := s.db.Exec(t.Context(), `UPDATE api_keys SET geo_scope = $1::jsonb WHERE id = 'old'`, hole); err != nil {
		t.Fatal(err)
	}
	var stored any
	_ = json.Unmarshal([]byte(hole), &stored)
	reason := "ring 1 of polygon 0 is a hole that lies outside its shell (ring 0)"
	list := send(t, r, "GET", "/admin/keys", "")
	if keys, _ := list.body["keys"].([]any); list.status != http.StatusOK || len(keys) != 1 || keys[0].(map[string]any)["status"] != "invalid_scope" {
		t.Errorf("GET /admin/keys = %d %s, want the key, invalid_scope", list.status, list.raw)
	}
	for _, tc := range []struct {
		name, method, path, body string
		wantStatus, wantError    any
		wantScope                any
	}{
		{"Get", "GET", "/admin/keys/old", "", "invalid_scope", reason, stored},
		{"PatchNotes", "PATCH", "/admin/keys/old", `{"notes":"still broken"}`, "invalid_scope", reason, stored},
		{"PatchScope", "PATCH", "/admin/keys/old", `{"spatial_scope":[0,0,4,4]}`, "active", nil, []any{0.0, 0.0, 4.0, 4.0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := send(t, r, tc.method, tc.path, tc.body)
			if a.status != http.StatusOK {
				t.Fatalf("%s %s = %d %s, want 200", tc.method, tc.path, a.status, a.raw)
			}
			got := map[string]any{"status": a.body["status"], "spatial_scope_error": a.body["spatial_scope_error"], "spatial_scope": a.body["spatial_scope"]}
			want := map[string]any{"status": tc.wantStatus, "spatial_scope_error": tc.wantError, "spatial_scope": tc.wantScope}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s", tc.method, tc.path, diff)
			}
		})
	}
}
