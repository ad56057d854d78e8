package gate

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/auth"
)

func TestCharges(t *testing.T) {
	g := New(access.Settings{Layers: map[string]access.Rule{
		"roads":   {Policy: "heavy", Cost: 5},
		"parcels": {Cost: 2},
	}}, nil, nil, nil)
	for _, tc := range []struct {
		name string
		ask  Ask
		want []charge
	}{
		{"NoLayer", Ask{}, []charge{{policy: "geofence", cost: 1, weight: 1}}},
		{"NoLayerCost", Ask{Cost: 4}, []charge{{policy: "geofence", cost: 4, weight: 1}}},
		{"PlainLayer", Ask{Layers: []string{"places"}, Cost: 3}, []charge{{policy: "geofence", cost: 3, weight: 1}}},
		{"OwnPolicy", Ask{Layers: []string{"roads"}, Cost: 3}, []charge{{policy: "heavy", cost: 15, weight: 5}}},
		{"Multiplier", Ask{Layers: []string{"parcels"}}, []charge{{policy: "geofence", cost: 2, weight: 2}}},
		{"Composite", Ask{Layers: []string{"places", "roads", "parcels"}}, []charge{{policy: "geofence", cost: 3, weight: 3}, {policy: "heavy", cost: 5, weight: 5}}},
		{"CachedKeepsPolicy", Ask{Layers: []string{"roads", "places"}, Cached: true}, []charge{{policy: "geofence", cost: 6, weight: 6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := g.charges("geofence", tc.ask)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(charge{}), cmpopts.IgnoreFields(charge{}, "decision")); diff != "" {
				t.Errorf("charges (-want +got):\n%s", diff)
			}
		})
	}
}

// serve runs one request through a free gated route that reads layers,
// whose handler is h, as a caller limited to layers.
func serve(g *Gate, layers []string, h gin.HandlerFunc) *httptest.ResponseRecorder {
	return serveOn(g, Spend{Layers: true}, layers, h)
}

// serveOn is serve on a route that spends s.
func serveOn(g *Gate, s Spend, layers []string, h gin.HandlerFunc) *httptest.ResponseRecorder {
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.GET("/x", func(c *gin.Context) {
		id := auth.Identity{Kind: auth.KindKey, ID: "k", Layers: layers}
		c.Request = c.Request.WithContext(auth.WithIdentity(c.Request.Context(), id))
	}, g.Route("GET /x", s), h)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	return w
}

// TestRefusedLayerSameAnswer: a caller refused a layer gets the same 403
// whether the layer exists or not, saying what it was refused: a read,
// or a write.
func TestRefusedLayerSameAnswer(t *testing.T) {
	g := New(access.Settings{Layers: map[string]access.Rule{
		"parcels": {Scopes: []string{"admin"}},
	}}, nil, nil, nil)
	for _, tc := range []struct {
		name    string
		write   bool
		refused string // the layer refused by the key's list
		want    string
		scoped  string // by the layer file's scopes
	}{
		{"Read", false, "roads", `may not read layer \"roads\"`, `Reading layer \"parcels\" needs`},
		{"Write", true, "roads", `may not write layer \"roads\"`, `Writing layer \"parcels\" needs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := func(layer string) gin.HandlerFunc {
				return func(c *gin.Context) {
					if p, ok := g.Admit(c, Ask{Layers: []string{layer}, Write: tc.write}); ok {
						defer p.Done()
						c.String(http.StatusOK, "served")
					}
				}
			}
			own := serve(g, []string{"places", "parcels"}, ask("places"))
			other := serve(g, []string{"places", "parcels"}, ask(tc.refused))
			unknown := serve(g, []string{"places", "parcels"}, ask("nope"))
			scoped := serve(g, []string{"places", "parcels"}, ask("parcels"))
			if own.Code != 200 || other.Code != 403 || unknown.Code != 403 || scoped.Code != 403 {
				t.Fatalf("own, other, unknown, scoped = %d, %d, %d, %d; want 200, 403, 403, 403", own.Code, other.Code, unknown.Code, scoped.Code)
			}
			if a, b := other.Body.String(), strings.ReplaceAll(unknown.Body.String(), "nope", tc.refused); a != b {
				t.Errorf("refused bodies differ: %s and %s", a, b)
			}
			if got := other.Body.String(); !strings.Contains(got, tc.want) {
				t.Errorf("refused body %s, want it to say %s", got, tc.want)
			}
			if got := scoped.Body.String(); !strings.Contains(got, tc.scoped) {
				t.Errorf("body refused by the layer's scopes %s, want it to say %s", got, tc.scoped)
			}
		})
	}
}

func TestRouteNoticesBypass(t *testing.T) {
	var bypassed []string
	g := Open()
	g.Bypassed = func(route string) { bypassed = append(bypassed, route) }
	serve(g, nil, func(c *gin.Context) { c.String(http.StatusOK, "unchecked") })
	serve(g, nil, func(c *gin.Context) { c.String(http.StatusNotFound, "refused before the gate") })
	serve(g, nil, func(c *gin.Context) {
		if p, ok := g.Admit(c, Ask{}); ok {
			p.Done()
			c.String(http.StatusOK, "checked")
		}
	})
	if !slices.Equal(bypassed, []string{"GET /x"}) {
		t.Errorf("bypasses reported = %v, want only the unchecked success", bypassed)
	}
}

func TestSpendPolicy(t *testing.T) {
	tiles := Spend{Policy: "tiles", Cached: "tiles-cached", Layers: true}
	docs := Spend{Policy: "tiles-cached"}
	for _, tc := range []struct {
		name  string
		spend Spend
		ask   Ask
		want  string
	}{
		{"Render", tiles, Ask{Layers: []string{"places"}}, "tiles"},
		{"CachedTile", tiles, Ask{Layers: []string{"places"}, Cached: true}, "tiles-cached"},
		{"DocumentWithoutCachedPolicy", docs, Ask{Cached: true}, "tiles-cached"},
		{"Free", Spend{}, Ask{Cached: true}, Free},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spend.policy(tc.ask); got != tc.want {
				t.Errorf("policy = %q, want %q", got, tc.want)
			}
		})
	}
	if got, want := tiles.Policies(), []string{"tiles", "tiles-cached"}; !slices.Equal(got, want) {
		t.Errorf("Policies() = %v, want %v", got, want)
	}
	if got := (Spend{Policy: "p", Cached: "p"}).Policies(); !slices.Equal(got, []string{"p"}) {
		t.Errorf("Policies() of one policy twice = %v, want [p]", got)
	}
}

// TestRouteNoticesUndeclaredLayers: a handler that names layers on a
// charged route whose row says it reads none is reported; cached answers
// and routes that say so are not.
func TestRouteNoticesUndeclaredLayers(t *testing.T) {
	var reported []string
	g := Open()
	g.Bypassed = func(route string) { reported = append(reported, route) }
	ask := func(a Ask) gin.HandlerFunc {
		return func(c *gin.Context) {
			if p, ok := g.Admit(c, a); ok {
				p.Done()
				c.String(http.StatusOK, "served")
			}
		}
	}
	layer := []string{"places"}
	serveOn(g, Spend{Policy: "features", Layers: true}, nil, ask(Ask{Layers: layer}))
	serveOn(g, Spend{Policy: "tiles-cached"}, nil, ask(Ask{Layers: layer, Cached: true}))
	serveOn(g, Spend{}, nil, ask(Ask{Layers: layer}))
	if len(reported) != 0 {
		t.Fatalf("declared or uncharged routes reported: %v", reported)
	}
	serveOn(g, Spend{Policy: "features"}, nil, ask(Ask{Layers: layer}))
	if !slices.Equal(reported, []string{"GET /x"}) {
		t.Errorf("reported = %v, want the route that named a layer it does not declare", reported)
	}
}

func TestPageCost(t *testing.T) {
	for _, tc := range []struct {
		features, bytes, want int
	}{
		{0, 0, 1},
		{1, 100, 1},
		{100, 1<<20 - 1, 1},
		{101, 0, 2},
		{10, 1 << 20, 2},
		{3, 3<<20 + 600, 4},
		{561, 5 << 20, 11},
	} {
		if got := PageCost(tc.features, tc.bytes); got != tc.want {
			t.Errorf("PageCost(%d, %d) = %d, want %d", tc.features, tc.bytes, got, tc.want)
		}
	}
	for _, tc := range []struct{ limit, want int }{{0, 1}, {1, 1}, {100, 1}, {101, 2}, {10000, 100}} {
		if got := PageEstimate(tc.limit); got != tc.want {
			t.Errorf("PageEstimate(%d) = %d, want %d", tc.limit, got, tc.want)
		}
	}
}
