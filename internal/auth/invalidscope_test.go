package auth

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/testenv"
)

// storedScopes are spatial scopes written straight into api_keys, as a
// row from before scopes were checked would be; want is part of the
// reason shown, "" for a scope that still loads.
var storedScopes = []struct {
	id, geo, want string
}{
	{"box", `[13, 52, 14, 53]`, ""},
	{"hole-outside", `{"type": "Polygon", "coordinates": [[[0, 0], [4, 0], [4, 4], [0, 4], [0, 0]], [[5, 5], [6, 5], [6, 6], [5, 6], [5, 5]]]}`, "lies outside its shell"},
	{"bow-tie", `{"type": "Polygon", "coordinates": [[[0, 0], [2, 2], [2, 0], [0, 2], [0, 0]]]}`, "intersects itself"},
	{"not-a-scope", `{"type": "Point", "coordinates": [1, 2]}`, "GeoJSON Polygon or MultiPolygon"},
}

// TestInvalidStoredScope: a key whose stored scope is invalid still loads,
// keeping the scope as stored and why it is refused; using it is a 403
// naming the fault, never the whole world; the other keys work; writing
// the key back leaves the stored scope as it was.
func TestInvalidStoredScope(t *testing.T) {
	ctx := context.Background()
	db := testenv.DB(t)
	s := NewStore(db)
	for _, tc := range storedScopes {
		mustCreate(t, s, CreateOptions{Key: Key{ID: tc.id, Scopes: AllScopes}, Secret: tc.id + "-secret"})
		if _, err := db.Exec(ctx, `UPDATE api_keys SET geo_scope = $2::jsonb WHERE id = $1`, tc.id, tc.geo); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List() = %v, want every key", err)
	}
	if len(keys) != len(storedScopes) {
		t.Fatalf("List() = %d keys, want %d", len(keys), len(storedScopes))
	}
	h := testRouter(NewAuthenticator(Options{Keys: NewKeyCache(s, time.Second, 100)}))
	for _, tc := range storedScopes {
		t.Run(tc.id, func(t *testing.T) {
			k, err := s.Get(ctx, tc.id)
			if err != nil {
				t.Fatalf("Get() = %v", err)
			}
			res := do(t, h, "GET", "/within", map[string]string{"x-api-key": tc.id + "-secret"}, "")
			if tc.want == "" {
				if k.InvalidSpatial != nil || k.Spatial == nil || res.status != 200 {
					t.Errorf("key = %+v, GET = %d %s; want a valid scope and 200", k, res.status, res.body)
				}
				return
			}
			if k.Spatial != nil || k.InvalidSpatial == nil || !strings.Contains(k.InvalidSpatial.Reason, tc.want) {
				t.Fatalf("key = %+v, want no scope and an InvalidSpatial saying %q", k, tc.want)
			}
			if got := string(k.SpatialJSON()); got != tc.geo {
				t.Errorf("SpatialJSON() = %s, want %s as stored", got, tc.geo)
			}
			if err := k.Usable(time.Now()); !errors.Is(err, ErrStoredScopeInvalid) {
				t.Errorf("Usable() = %v, want ErrStoredScopeInvalid", err)
			}
			checkRejection(t, res, 403, tc.want, tc.id+"-secret")
			if !strings.Contains(res.detail.(string), "PATCH /admin/keys/"+tc.id) {
				t.Errorf("detail = %q, want it to say how to fix it", res.detail)
			}

			k.Notes = "changed"
			if err := s.Update(ctx, k); err != nil {
				t.Fatalf("Update() = %v", err)
			}
			var stored string
			if err := db.QueryRow(ctx, `SELECT geo_scope::text FROM api_keys WHERE id = $1`, tc.id).Scan(&stored); err != nil {
				t.Fatal(err)
			}
			if stored != tc.geo {
				t.Errorf("geo_scope after Update = %s, want %s as it was", stored, tc.geo)
			}
		})
	}
}
