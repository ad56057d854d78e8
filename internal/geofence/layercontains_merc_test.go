package geofence

import (
	"context"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/geogate/geogate/internal/openapi/contract"
	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// merc900913 is a polygon layer in EPSG:900913 (as in martin's fixtures):
// boxes around longitude 13.4 at the equator, at 52.5 and at 70 degrees
// north, drawn in the layer's own metres. Its CRS goes from WGS84 to a
// sphere through geocentric coordinates, dropping the height, so that
// projecting a point there and back moves it by up to about 140 m.
const merc900913 = `
CREATE TABLE public.merc (id integer PRIMARY KEY, geom geometry(Polygon, 900913));
INSERT INTO public.merc
SELECT id, ST_MakeEnvelope(ST_X(a), ST_Y(a), ST_X(b), ST_Y(b), 900913)
FROM (VALUES (1, 0.0), (2, 52.5), (3, 70.0)) v(id, lat),
     ST_Transform(ST_SetSRID(ST_MakePoint(13.3, lat - 0.1), 4326), 900913) a,
     ST_Transform(ST_SetSRID(ST_MakePoint(13.5, lat + 0.1), 4326), 900913) b;
CREATE INDEX ON public.merc USING gist (geom);
ANALYZE public.merc;`

// TestContainsIn900913: a point is in a feature of a 900913 layer exactly
// when it is in the feature's geometry brought to longitude and latitude
// (ST_Transform to 4326, as /within and the items read it), for points
// 1 m, 10 m and 100 m inside and outside each edge of each box.
func TestContainsIn900913(t *testing.T) {
	ctx := context.Background()
	pool := testenv.DB(t)
	if _, err := pool.Exec(ctx, merc900913); err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Open(ctx, pool, catalog.Settings{Schemas: []string{"public"}, Own: "geogate"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc := New(pg.Runner{Pool: pool, Timeouts: testTimeouts}, cat, Settings{}, nil)
	h := contract.Wrap(t, testRouter(svc, testRules, nil), testRules.Limits)

	rows, err := pool.Query(ctx, `SELECT ST_XMin(b), ST_YMin(b), ST_XMax(b), ST_YMax(b)
		FROM (SELECT Box2D(ST_Transform(geom, 4326)) b FROM public.merc ORDER BY id) s`)
	if err != nil {
		t.Fatal(err)
	}
	var pts [][2]float64
	for rows.Next() {
		var x0, y0, x1, y1 float64
		if err := rows.Scan(&x0, &y0, &x1, &y1); err != nil {
			t.Fatal(err)
		}
		mx, my := (x0+x1)/2, (y0+y1)/2
		for _, m := range []float64{1, 10, 100} {
			dy := m / 111_000
			dx := dy / math.Cos(my*math.Pi/180)
			for _, s := range []float64{-1, 1} { // inside, outside
				pts = append(pts, [2]float64{mx, y0 + s*-dy}, [2]float64{mx, y1 + s*dy},
					[2]float64{x0 + s*-dx, my}, [2]float64{x1 + s*dx, my})
			}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(pts) != 3*24 {
		t.Fatalf("test points: %d, %v; want 72", len(pts), err)
	}
	want := mercTruth(t, pool, pts)
	got := batchContains(t, h, "merc", pts)
	for i, p := range pts {
		if diff := cmp.Diff(want[i], got[i]); diff != "" {
			t.Errorf("POST contains %v (-want +got):\n%s", p, diff)
		}
	}
	for i, p := range pts {
		var ids []string
		for _, f := range getContains(t, h, "merc", p) {
			ids = append(ids, idText(t, f.ID))
		}
		if fmt.Sprint(ids) != fmt.Sprint(want[i]) && !(len(ids) == 0 && len(want[i]) == 0) {
			t.Errorf("GET contains %v = %v, want %v", p, ids, want[i])
		}
	}
}

// mercTruth is, for each point, the ids of merc's rows whose geometry in
// 4326 holds it.
func mercTruth(t *testing.T, pool *pgxpool.Pool, pts [][2]float64) [][]string {
	t.Helper()
	out := make([][]string, len(pts))
	for i, p := range pts {
		out[i] = []string{}
		err := pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(id::text ORDER BY id), '{}') FROM public.merc
			WHERE ST_Intersects(ST_Transform(geom, 4326), ST_SetSRID(ST_MakePoint($1, $2), 4326))`, p[0], p[1]).Scan(&out[i])
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
