package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

// curveTables are added to the peer fixtures, whose only curves are in
// table_source's generic column: columns typed as curved surfaces, one in
// a projected SRID.
const curveTables = `
CREATE TABLE public.curve_polygons (id integer PRIMARY KEY, geom geometry(CurvePolygon, 4326));
INSERT INTO public.curve_polygons VALUES
  (1, 'SRID=4326;CURVEPOLYGON(CIRCULARSTRING(-2 0,-1 -1,0 0,1 -1,2 0,0 2,-2 0),(-1 0,0 0.5,1 0,0 1,-1 0))'),
  (2, 'SRID=4326;CURVEPOLYGON((10 10,12 10,12 12,10 12,10 10))');
CREATE INDEX ON public.curve_polygons USING gist (geom);
CREATE TABLE public.curve_surfaces (id integer PRIMARY KEY, geom geometry(MultiSurface, 3857));
INSERT INTO public.curve_surfaces VALUES
  (1, ST_Transform('SRID=4326;MULTISURFACE(CURVEPOLYGON(CIRCULARSTRING(-2 0,-1 -1,0 0,1 -1,2 0,0 2,-2 0)),((10 10,12 10,12 12,10 12,10 10)))'::geometry, 3857));
CREATE INDEX ON public.curve_surfaces USING gist (geom);
CREATE TABLE public.curve_parts AS SELECT * FROM public.curve_polygons;
ALTER TABLE public.curve_parts ADD PRIMARY KEY (id);
ANALYZE;`

// curvePoints are tested against the curved polygons above: inside the
// shell's arcs, in the hole between two arcs, between the two lower
// lobes, and near the top arc.
var curvePoints = [][2]float64{{0, 1.5}, {0, 0.75}, {-1, -0.5}, {0, -0.5}, {1.9, 0.5}, {0, 1.99}, {11, 11}}

// TestPeerCurves: where a layer's column holds curves, point-in-polygon
// (/geofences/contains?layer=, one point and a batch) and CQL2's spatial
// functions answer as PostGIS does on the curves cut into straight
// segments (ST_CurveToLine), and never with a 5xx.
func TestPeerCurves(t *testing.T) {
	pool, dbURL := testenv.PeerDBWithURL(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, curveTables); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"DATABASE_URL":       dbURL,
		"PUBLISH_SCHEMAS":    strings.Join(testenv.PeerSchemas, ","),
		"RATELIMIT_FEATURES": "100000/1s",
		"RATELIMIT_GEOFENCE": "100000/1s",
	}
	// curve_parts is tested through a subdivided copy.
	if out := runCLI(t, env, "publish", "--contains", "curve_parts"); !strings.Contains(out, "curve_parts") {
		t.Fatalf("publish --contains curve_parts said %q", out)
	}
	base, _ := startService(t, env)
	// truth lists the keys of table's rows whose linearised polygons hold
	// the point, tested in 4326.
	truth := func(table, key string, p [2]float64) []string {
		t.Helper()
		q := fmt.Sprintf(`SELECT coalesce(array_agg(%s::text ORDER BY %s), '{}') FROM public.%s
			WHERE ST_Intersects(ST_CollectionExtract(ST_Transform(ST_CurveToLine(geom), 4326), 3), ST_SetSRID(ST_Point($1, $2), 4326))`, key, key, table)
		var ids []string
		if err := pool.QueryRow(ctx, q, p[0], p[1]).Scan(&ids); err != nil {
			t.Fatal(err)
		}
		return ids
	}
	for _, l := range []struct{ layer, key string }{{"table_source", "gid"}, {"curve_polygons", "id"}, {"curve_surfaces", "id"}, {"curve_parts", "id"}} {
		t.Run("Contains/"+l.layer, func(t *testing.T) {
			var batch []string
			var want [][]string
			for _, p := range curvePoints {
				var got struct{ Fences []struct{ ID any } }
				peerGet(t, fmt.Sprintf("%s/geofences/contains?layer=%s&lng=%g&lat=%g", base, l.layer, p[0], p[1]), 200, &got)
				var ids []string
				for _, f := range got.Fences {
					ids = append(ids, fmt.Sprint(f.ID))
				}
				w := truth(l.layer, l.key, p)
				if !slices.Equal(ids, w) && !(len(ids) == 0 && len(w) == 0) {
					t.Errorf("GET contains %v = %v, want %v", p, ids, w)
				}
				batch = append(batch, fmt.Sprintf("[%g,%g]", p[0], p[1]))
				want = append(want, w)
			}
			status, _, body := callWith(t, "POST", base+"/geofences/contains?layer="+l.layer, `{"points":[`+strings.Join(batch, ",")+`]}`)
			if status != http.StatusOK {
				t.Fatalf("POST contains = %d %s, want 200", status, body)
			}
			var got struct{ Results []struct{ Fences []any } }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("POST contains: %v in %s", err, body)
			}
			for i, r := range got.Results {
				var ids []string
				for _, f := range r.Fences {
					ids = append(ids, fmt.Sprint(f))
				}
				if !slices.Equal(ids, want[i]) && !(len(ids) == 0 && len(want[i]) == 0) {
					t.Errorf("POST contains %v = %v, want %v", curvePoints[i], ids, want[i])
				}
			}
		})
	}
	// The other routes serve a curved type's rows, an arc-less one too.
	for _, layer := range []string{"curve_polygons", "curve_surfaces"} {
		for _, u := range []string{
			"/collections/" + layer + "/items?limit=100",
			"/collections/" + layer + "/items/2",
			"/tiles/" + layer + "/0/0/0.mvt",
			"/tiles/" + layer + "/7/67/60.mvt",
			"/within?layer=" + layer + "&lng=11&lat=11&radius=1000",
		} {
			if strings.HasSuffix(u, "/items/2") && layer == "curve_surfaces" {
				u = strings.TrimSuffix(u, "2") + "1"
			}
			t.Run("Serve"+u, func(t *testing.T) {
				status, _, body := callWith(t, "GET", base+u, "")
				if status != http.StatusOK {
					t.Errorf("GET %s = %d %.300s, want 200", u, status, body)
				}
			})
		}
	}
	for _, tc := range []struct{ layer, key, filter, sql string }{
		{"table_source", "gid", "S_INTERSECTS(geom, POINT(0 1.5))", "ST_Intersects(ST_CurveToLine(geom), 'SRID=4326;POINT(0 1.5)')"},
		{"table_source", "gid", "S_INTERSECTS(geom, BBOX(0.5, 2.5, 1.5, 3.5))", "ST_Intersects(ST_CurveToLine(geom), ST_MakeEnvelope(0.5, 2.5, 1.5, 3.5, 4326))"},
		{"table_source", "gid", "S_WITHIN(geom, POLYGON((-3 -3, 8 -3, 8 8, -3 8, -3 -3)))", "ST_Within(ST_CurveToLine(geom), 'SRID=4326;POLYGON((-3 -3, 8 -3, 8 8, -3 8, -3 -3))')"},
		{"table_source", "gid", "S_CONTAINS(geom, POINT(-1 -0.5))", "ST_Contains(ST_CurveToLine(geom), 'SRID=4326;POINT(-1 -0.5)')"},
		{"table_source", "gid", "S_DISJOINT(geom, POINT(0 1.5))", "ST_Disjoint(ST_CurveToLine(geom), 'SRID=4326;POINT(0 1.5)')"},
		{"curve_polygons", "id", "S_INTERSECTS(geom, POINT(0 0.75))", "ST_Intersects(ST_CurveToLine(geom), 'SRID=4326;POINT(0 0.75)')"},
		{"curve_polygons", "id", "S_CONTAINS(geom, POINT(0 1.5))", "ST_Contains(ST_CurveToLine(geom), 'SRID=4326;POINT(0 1.5)')"},
		{"curve_surfaces", "id", "S_INTERSECTS(geom, POINT(0 1.5))", "ST_Intersects(ST_Transform(ST_CurveToLine(geom), 4326), 'SRID=4326;POINT(0 1.5)')"},
		{"curve_surfaces", "id", "S_TOUCHES(geom, POINT(12 12))", "ST_Touches(ST_CurveToLine(geom), ST_Transform('SRID=4326;POINT(12 12)'::geometry, 3857))"},
	} {
		t.Run("CQL2/"+tc.layer+"/"+tc.filter, func(t *testing.T) {
			var want []string
			q := fmt.Sprintf(`SELECT coalesce(array_agg(%s::text ORDER BY %s), '{}') FROM public.%s WHERE %s`, tc.key, tc.key, tc.layer, tc.sql)
			if err := pool.QueryRow(ctx, q).Scan(&want); err != nil {
				t.Fatal(err)
			}
			var page ogcPage
			peerGet(t, base+"/collections/"+tc.layer+"/items?limit=1000&filter="+url.QueryEscape(tc.filter), 200, &page)
			var got []string
			for _, f := range page.Features {
				got = append(got, strings.Trim(string(f.ID), `"`))
			}
			slices.SortFunc(got, func(a, b string) int {
				x, _ := strconv.Atoi(a)
				y, _ := strconv.Atoi(b)
				return x - y
			})
			slices.SortFunc(want, func(a, b string) int {
				x, _ := strconv.Atoi(a)
				y, _ := strconv.Atoi(b)
				return x - y
			})
			if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
				t.Errorf("filter %s = ids %v, want %v", tc.filter, got, want)
			}
		})
	}
}
