package cql2

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/testenv"
)

// TestFiltersSelectWhatTheySay runs every filter of filterCases, in its
// text and its JSON form, against the demo data and a team's own tables,
// and compares the rows it selects with those of the hand-written WHERE
// clause.
func TestFiltersSelectWhatTheySay(t *testing.T) {
	pool := testenv.UserDB(t)
	for _, c := range filterCases {
		t.Run(c.name, func(t *testing.T) {
			tbl := testTables[c.table]
			want := selectKeys(t, pool, "SELECT "+tbl.key+" FROM "+tbl.from+" WHERE "+c.where)
			if len(want) == 0 && !c.empty {
				t.Fatalf("the hand-written WHERE %s selects nothing: the case proves little", c.where)
			}
			forms := map[string]func() (Expr, error){
				"text": func() (Expr, error) { return ParseText(c.text, Limits{}) },
				"json": func() (Expr, error) { return ParseJSON([]byte(c.json), Limits{}) },
			}
			for form, parse := range forms {
				e, err := parse()
				if err != nil {
					t.Fatalf("%s: %v", form, err)
				}
				var args []any
				where, err := SQL(e, tbl.q, c.crs, &args)
				if err != nil {
					t.Fatalf("%s: SQL(%s): %v", form, e, err)
				}
				got := selectKeys(t, pool, "SELECT "+tbl.key+" FROM "+tbl.from+" WHERE "+where, args...)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s form %s selects other rows than %s (-want +got):\n%s\nSQL: %s %v", form, e, c.where, diff, where, args)
				}
			}
		})
	}
}

// selectKeys returns the first column of the rows sql selects, sorted.
func selectKeys(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	defer rows.Close()
	var keys []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	slices.Sort(keys)
	return keys
}

// TestSpatialFiltersUseTheIndex checks with EXPLAIN that each S_ function
// but S_DISJOINT reaches its table through the table's spatial index, in
// the table's own SRID or as geography, under a custom and under a generic
// plan (geogate's tile pool plans generically). enable_seqscan is off so
// that the small tables give the plan the index allows, not the one their
// size makes cheapest; on the million points the planner chooses the
// index of its own accord.
func TestSpatialFiltersUseTheIndex(t *testing.T) {
	pool := testenv.UserDB(t)
	million := testTable{"public.million t", "t.id::text", Columns{"geom": {SQL: "t.geom", Type: "geometry", SRID: 4326}}}
	tests := []struct {
		name   string
		table  testTable
		filter string
		crs    CRS
		index  string
		seqOK  bool // leave enable_seqscan on
	}{
		{"MillionIntersects", million, `S_INTERSECTS(geom, BBOX(13, 52, 13.5, 52.5))`, CRS{}, "million_geom_idx", true},
		{"MillionWithin", million, `S_WITHIN(geom, POLYGON((13 52, 14 52, 14 53, 13 52)))`, CRS{}, "million_geom_idx", true},
		{"MillionEquals", million, `S_EQUALS(geom, POINT(13.4 52.5))`, CRS{}, "million_geom_idx", true},
		{"MillionLatitudeFirst", million, `S_INTERSECTS(geom, BBOX(52, 13, 52.5, 13.5))`, CRS{SRID: 4326, LatLon: true}, "million_geom_idx", true},
		{"Contains", testTables["geofences"], `S_CONTAINS(geom, POINT(13.4 52.5))`, CRS{}, "geofences_geom_idx", false},
		{"Touches", testTables["geofences"], `S_TOUCHES(geom, LINESTRING(13 52, 14 53))`, CRS{}, "geofences_geom_idx", false},
		{"Overlaps", testTables["geofences"], `S_OVERLAPS(geom, BBOX(5, 45, 15, 55))`, CRS{}, "geofences_geom_idx", false},
		{"Crosses", testTables["geofences"], `S_CROSSES(geom, LINESTRING(2.35 48.85, 13.4 52.5))`, CRS{}, "geofences_geom_idx", false},
		{"Collection", testTables["geofences"], `S_INTERSECTS(geom, GEOMETRYCOLLECTION(POINT(1 2), POLYGON((0 0, 1 0, 1 1, 0 0))))`, CRS{}, "geofences_geom_idx", false},
		{"WebMercator", testTables["roads"], `S_INTERSECTS(geom, BBOX(13, 52, 14, 53))`, CRS{}, "roads_geom_idx", false},
		{"WebMercatorLiteralOnPlaces", testTables["places"], `S_WITHIN(geom, BBOX(1447153, 6800125, 1558472, 6982998))`, CRS{SRID: 3857}, "places_geom_idx", false},
		{"UTM", testTables["stops"], `S_WITHIN(geom, BBOX(13, 52, 14, 53))`, CRS{}, "bus_stops_geom_idx", false},
		{"StatePlane", testTables["parcels"], `S_INTERSECTS(geom, POINT(-73.9857 40.7484))`, CRS{}, "parcels_geom_idx", false},
		{"Geography", testTables["airports"], `S_INTERSECTS(geography, BBOX(5, 45, 15, 55))`, CRS{}, "airports_geog_idx", false},
	}
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseText(tt.filter, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			var args []any
			where, err := SQL(e, tt.table.q, tt.crs, &args)
			if err != nil {
				t.Fatal(err)
			}
			var literals []string
			for _, a := range args {
				literals = append(literals, "'"+strings.ReplaceAll(a.(string), "'", "''")+"'")
			}
			seq := "off"
			if tt.seqOK {
				seq = "on"
			}
			for _, q := range []string{"SET enable_seqscan = " + seq, "PREPARE filtered AS SELECT count(*) FROM " + tt.table.from + " WHERE " + where} {
				if _, err := conn.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
				if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
					t.Fatal(err)
				}
				var out []byte
				q := fmt.Sprintf("EXPLAIN (FORMAT JSON) EXECUTE filtered(%s)", strings.Join(literals, ", "))
				if err := conn.QueryRow(ctx, q).Scan(&out); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				if idx, seqs := planScans(t, out); !slices.Contains(idx, tt.index) || seqs > 0 {
					t.Errorf("%s: %s uses indexes %v and %d sequential scans, want %s and none\n%s", mode, tt.filter, idx, seqs, tt.index, out)
				}
			}
			if _, err := conn.Exec(ctx, "DEALLOCATE filtered"); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, q := range []string{"RESET enable_seqscan", "RESET plan_cache_mode"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
}

// planNode is the part of an EXPLAIN (FORMAT JSON) node the test reads.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	IndexName string     `json:"Index Name"`
	Plans     []planNode `json:"Plans"`
}

// planScans lists the indexes a plan scans and counts its sequential
// scans.
func planScans(t *testing.T, explain []byte) (indexes []string, seqScans int) {
	t.Helper()
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(explain, &plans); err != nil || len(plans) == 0 {
		t.Fatalf("EXPLAIN output %s: %v", explain, err)
	}
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.IndexName != "" {
			indexes = append(indexes, n.IndexName)
		}
		if n.NodeType == "Seq Scan" {
			seqScans++
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plans[0].Plan)
	return indexes, seqScans
}
