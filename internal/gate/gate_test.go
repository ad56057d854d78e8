package gate

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/httpx"
)

func TestCharges(t *testing.T) {
	g := New(access.Settings{Layers: map[string]access.Rule{
		"roads":   {Policy: "heavy", Cost: 5},
		"parcels": {Cost: 2},
	}}, nil, nil)
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
		{"CachedKeepsPolicy", Ask{Cached: []string{"roads", "places"}}, []charge{{policy: "geofence", cost: 6, weight: 6, cached: true}}},
		{"CachedBesideWorked", Ask{Layers: []string{"roads"}, Cached: []string{"places"}}, []charge{{policy: "heavy", cost: 5, weight: 5}, {policy: "geofence", cost: 1, weight: 1, cached: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := g.charges("geofence", "geofence", tc.ask)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(charge{}), cmpopts.IgnoreFields(charge{}, "decision", "learn")); diff != "" {
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
		ctx, rt := WithRoute(auth.WithIdentity(c.Request.Context(), id), "GET /x", s)
		c.Request = c.Request.WithContext(ctx)
		c.Next()
		g.Finish(rt, c.Writer.Status())
	}, h)
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest("GET", "/x", nil))
	return w
}

// admit asks g as a handler does; ok false means it has answered.
func admit(c *gin.Context, g *Gate, a Ask) (Pass, bool) {
	p, err := g.Admit(c.Request.Context(), a)
	if err != nil {
		httpx.Abort(c, err)
		return nil, false
	}
	httpx.SetHeader(c, p.Header())
	return p, true
}

// TestRefusedLayerSameAnswer: a caller refused a layer gets the same 403
// whether the layer exists or not, saying what it was refused: a read,
// or a write.
func TestRefusedLayerSameAnswer(t *testing.T) {
	g := New(access.Settings{Layers: map[string]access.Rule{
		"parcels": {Scopes: []string{"admin"}},
	}}, nil, nil)
	for _, tc := range []struct {
		name    string
		write   bool
		refused string // the layer refused by the key's list
		want    string
		scoped  string // by the layer file's scopes
	}{
		{"Read", false, "roads", `may not read layer \"roads\"`, `may not read layer \"parcels\"`},
		{"Write", true, "roads", `may not write layer \"roads\"`, `may not write layer \"parcels\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := func(layer string) gin.HandlerFunc {
				return func(c *gin.Context) {
					if p, ok := admit(c, g, Ask{Layers: []string{layer}, Write: tc.write}); ok {
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
			// One answer whatever refused the layer: the list or the
			// layer file's scopes, which it must not name.
			if a, b := other.Body.String(), strings.ReplaceAll(scoped.Body.String(), "parcels", tc.refused); a != b {
				t.Errorf("refused by the list %s, by the layer file %s: want one answer", a, b)
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
		if p, ok := admit(c, g, Ask{}); ok {
			p.Done()
			c.String(http.StatusOK, "checked")
		}
	})
	if !slices.Equal(bypassed, []string{"GET /x"}) {
		t.Errorf("bypasses reported = %v, want only the unchecked success", bypassed)
	}
}

func TestSpendPolicies(t *testing.T) {
	tiles := Spend{Policy: "tiles", Cached: "tiles-cached", Layers: true}
	docs := Spend{Policy: "tiles-cached"}
	for _, tc := range []struct {
		name  string
		spend Spend
		want  string
	}{
		{"Tiles", tiles, "tiles-cached"},
		{"DocumentWithoutCachedPolicy", docs, "tiles-cached"},
		{"Free", Spend{}, Free},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.spend.cached(); got != tc.want {
				t.Errorf("cached() = %q, want %q", got, tc.want)
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
			if p, ok := admit(c, g, a); ok {
				p.Done()
				c.String(http.StatusOK, "served")
			}
		}
	}
	layer := []string{"places"}
	serveOn(g, Spend{Policy: "features", Layers: true}, nil, ask(Ask{Layers: layer}))
	serveOn(g, Spend{Policy: "tiles-cached"}, nil, ask(Ask{Cached: layer}))
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

// TestEstimatesBounded: past its bounds the table forgets the least
// recently used kind, one at a time, never all: a flood of new kinds
// leaves a kind in use where it was.
func TestEstimatesBounded(t *testing.T) {
	e := newEstimates()
	real := kind{group: "GET /within|geofence|places", size: "500"}
	e.learn(real, 800)
	for i := range 20000 {
		e.learn(kind{group: "GET /within|geofence|places", size: "r" + strconv.Itoa(i)}, 1)
		if i%(maxSizes/2) == 0 {
			e.of(real, 1) // in use more often than the bound turns over
		}
	}
	if got := e.of(real, 1); got != 800 {
		t.Errorf("estimate in use after a flood of sizes = %d, want 800", got)
	}
	for i := range 20000 {
		e.learn(kind{group: "GET /x|p|made-up-" + strconv.Itoa(i), size: "1"}, 1)
		if i%100 == 0 {
			e.of(real, 1)
		}
	}
	if got := e.of(real, 1); got != 800 {
		t.Errorf("estimate in use after a flood of groups = %d, want 800", got)
	}
	if n := e.len(); n > maxGroups*maxSizes {
		t.Errorf("%d estimates kept, want at most %d", n, maxGroups*maxSizes)
	}
	e.learn(kind{group: strings.Repeat("x", maxKey), size: "1"}, 5)
	if got := e.of(kind{group: strings.Repeat("x", maxKey), size: "1"}, 1); got != 1 {
		t.Errorf("a key over maxKey was kept (estimate %d)", got)
	}
}
