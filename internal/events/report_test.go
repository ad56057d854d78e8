package events_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

// countriesAt computes independently, on the whole country polygons
// rather than their subdivided copy, which countries hold each point:
// their ids as text, sorted.
func countriesAt(t *testing.T, pool *pgxpool.Pool, pts [][2]float64) [][]string {
	t.Helper()
	out := make([][]string, len(pts))
	for i, p := range pts {
		rows, err := pool.Query(context.Background(),
			`SELECT id::text FROM public.geofences WHERE ST_Intersects(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326))`, p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], id)
		}
		rows.Close()
		slices.Sort(out[i])
	}
	return out
}

// wantTransitions walks the sets of fences a device is in, one per
// position, and lists the enters and exits they imply: kind, fence and
// the position's index.
func wantTransitions(sets [][]string) []string {
	var out []string
	var in []string
	for i, s := range sets {
		for _, f := range in {
			if !slices.Contains(s, f) {
				out = append(out, fmt.Sprintf("exit %s @%d", f, i))
			}
		}
		for _, f := range s {
			if !slices.Contains(in, f) {
				out = append(out, fmt.Sprintf("enter %s @%d", f, i))
			}
		}
		in = s
	}
	return out
}

// TestTransitionsOnRealFences drives devices across the demo's country
// borders, onto a border vertex, and over the antimeridian, and checks
// every event against an independent point-in-polygon computation on the
// whole polygons.
func TestTransitionsOnRealFences(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	// A vertex of Germany's border: on the boundary, so inside (a point
	// on an edge intersects) Germany and whichever neighbour shares it.
	var vx, vy float64
	if err := pool.QueryRow(ctx, `SELECT ST_X(p), ST_Y(p) FROM (SELECT ST_PointN(ST_ExteriorRing(ST_GeometryN(geom, 1)), 1) p
		FROM public.geofences WHERE name = 'DEU') g`).Scan(&vx, &vy); err != nil {
		t.Fatal(err)
	}
	trips := map[string][][2]float64{
		// Paris, Brussels, Cologne, Berlin, Warsaw, the Baltic Sea, Berlin
		"europe": {{2.35, 48.86}, {4.35, 50.85}, {6.96, 50.94}, {13.40, 52.52}, {21.01, 52.23}, {19.0, 55.5}, {13.40, 52.52}},
		// Chukotka either side of the antimeridian, then the Bering Sea and Alaska
		"antimeridian": {{179.5, 66.0}, {-179.5, 66.0}, {-175.0, 64.5}, {-172.0, 62.0}, {-165.0, 65.0}},
		// onto a border vertex and off it
		"edge": {{vx, vy}, {vx + 0.5, vy + 0.5}, {vx, vy}},
	}
	svc := newService(t, pool, testSettings)
	sub, err := svc.CreateSubscription(ctx, "key:fleet", events.Subscription{Layer: "geofences", Kinds: []events.Kind{events.Enter, events.Exit}})
	if err != nil {
		t.Fatal(err)
	}
	var ps []events.Position
	for dev, pts := range trips {
		for i, p := range pts {
			ps = append(ps, events.Position{Device: dev, Time: at(i), Lng: p[0], Lat: p[1]})
		}
	}
	// One batch, its devices interleaved: order comes from times.
	slices.SortFunc(ps, func(a, b events.Position) int { return a.Time.Compare(b.Time) })
	if _, err := svc.Report(ctx, "key:fleet", ps); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, e := range pull(t, svc, "key:fleet", sub.ID) {
		i := slices.Index(slices.Collect(func(yield func(int64) bool) {
			for n := range trips[e.Device] {
				if !yield(at(n).Unix()) {
					return
				}
			}
		}), e.Time.Unix())
		got[e.Device] = append(got[e.Device], fmt.Sprintf("%s %s @%d", e.Kind, e.Fence, i))
	}
	for dev, pts := range trips {
		want := wantTransitions(countriesAt(t, pool, pts))
		if len(want) < 2 {
			t.Fatalf("%s: the independent computation finds %v; the trip should cross borders", dev, want)
		}
		if strings.Join(got[dev], ", ") != strings.Join(want, ", ") {
			t.Errorf("%s: events\n got %v\nwant %v", dev, got[dev], want)
		}
	}
}

// TestCrossOnRealFences sends a device from Paris to Warsaw in one step:
// the countries in between are crossed, as an independent computation on
// the whole polygons finds them, and France and Poland are left and
// entered, not crossed.
func TestCrossOnRealFences(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	// A caller whose scope is Paris and Warsaw, but not what lies between,
	// hears of no fence crossed on the way.
	twoCities, err := spatial.Parse([]byte(`{"type":"MultiPolygon","coordinates":[
		[[[2,48.5],[3,48.5],[3,49.5],[2,49.5],[2,48.5]]], [[[20.5,52],[21.5,52],[21.5,52.5],[20.5,52.5],[20.5,52]]]]}`))
	if err != nil {
		t.Fatal(err)
	}
	scoped := svc
	scopedCtx := auth.WithIdentity(ctx, auth.Identity{Kind: auth.KindKey, ID: "scoped", Spatial: twoCities})
	sub, err := svc.CreateSubscription(ctx, "key:fleet", events.Subscription{Layer: "geofences", Kinds: []events.Kind{events.Cross}})
	if err != nil {
		t.Fatal(err)
	}
	scopedSub, err := scoped.CreateSubscription(ctx, "key:scoped", events.Subscription{Layer: "geofences", Kinds: []events.Kind{events.Cross}})
	if err != nil {
		t.Fatal(err)
	}
	paris, warsaw := [2]float64{2.35, 48.86}, [2]float64{21.01, 52.23}
	trip := []events.Position{
		{Device: "jet", Time: at(0), Lng: paris[0], Lat: paris[1]},
		{Device: "jet", Time: at(1), Lng: warsaw[0], Lat: warsaw[1]},
	}
	if _, err := svc.Report(ctx, "key:fleet", trip); err != nil {
		t.Fatal(err)
	}
	if _, err := scoped.Report(scopedCtx, "key:scoped", trip); err != nil {
		t.Fatal(err)
	}
	if evs := pull(t, scoped, "key:scoped", scopedSub.ID); len(evs) != 0 {
		t.Errorf("a caller scoped to the two cities heard of %d fences crossed between them, want none", len(evs))
	}
	var got []string
	for _, e := range pull(t, svc, "key:fleet", sub.ID) {
		got = append(got, e.Fence)
	}
	rows, err := pool.Query(ctx, `
SELECT id::text FROM public.geofences
WHERE ST_Intersects(geom, ST_MakeLine(ST_SetSRID(ST_MakePoint($1, $2), 4326), ST_SetSRID(ST_MakePoint($3, $4), 4326)))
  AND NOT ST_Intersects(geom, ST_SetSRID(ST_MakePoint($1, $2), 4326))
  AND NOT ST_Intersects(geom, ST_SetSRID(ST_MakePoint($3, $4), 4326))
ORDER BY id::text`, paris[0], paris[1], warsaw[0], warsaw[1])
	if err != nil {
		t.Fatal(err)
	}
	want, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("crossed %v, want %v (the independent computation)", got, want)
	}
}
