package catalog

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/testenv"
)

func userSettings() Settings {
	return Settings{Schemas: testenv.UserSchemas, Own: "geogate"}
}

// layerSummary is what a test checks of a layer.
type layerSummary struct {
	Schema, Table, Column, Kind, Type string
	SRID                              int
	Geography, Indexed                bool
	Key                               string // column:type, or "" for the row hash
	Invalidated                       bool
}

func summary(l *Layer) layerSummary {
	key := ""
	if !l.Key.FromRow() {
		key = l.Key.Column + ":" + l.Key.Type
	}
	return layerSummary{l.Schema, l.Table, l.Column, l.Kind, l.GeometryType, l.SRID, l.Geography, l.Indexed, key, l.Invalidated}
}

// TestDiscoverUserDatabase finds every geometry and geography column of a
// team's own database with its kind, type, SRID, key and index, under the
// documented ids, and nothing of geogate's own schema.
func TestDiscoverUserDatabase(t *testing.T) {
	db := testenv.UserDB(t)
	ls, err := Discover(context.Background(), db, userSettings())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]layerSummary{}
	for _, l := range ls {
		got[l.ID] = summary(l)
	}
	want := map[string]layerSummary{
		"places":        {"public", "places", "geom", "table", "Point", 4326, false, true, "id:integer", true},
		"geofences":     {"public", "geofences", "geom", "table", "MultiPolygon", 4326, false, true, "id:integer", true},
		"roads":         {"public", "roads", "geom", "table", "LineString", 3857, false, true, "gid:integer", false},
		"parcels":       {"public", "parcels", "geom", "table", "MultiPolygon", 2263, false, true, "parcel_id:integer", false},
		"french_cities": {"public", "french_cities", "geom", "view", "Point", 4326, false, false, "", false},
		"city_buffers":  {"public", "city_buffers", "geom", "view", "Geometry", 4326, false, false, "", false},
		// Its unique index allows NULLs, which a matview column never rules out.
		"country_centres": {"public", "country_centres", "geom", "materialized view", "Point", 4326, false, true, "", false},
		"sightings":       {"public", "sightings", "geom", "table", "Point", 4326, false, true, "", false},
		"airports":        {"public", "airports", "geog", "table", "Point", 4326, true, true, "iata:string", false},
		"million":         {"public", "million", "geom", "table", "Point", 4326, false, true, "id:integer", false},
		"countries":       {"public", "countries", "geom", "table", "MultiPolygon", 3857, false, true, "iso3:string", false},
		"zones":           {"public", "zones", "geog", "table", "Polygon", 4326, true, true, "zone_id:integer", false},
		"landmarks":       {"public", "landmarks", "geom", "table", "Geometry", 4326, false, true, "id:integer", false},
		"transit__Bus_Stops-" + idHash("transit", "Bus Stops", "geom"):               {"transit", "Bus Stops", "geom", "table", "Point", 32633, false, true, "stop_code:string", false},
		"Mixed_Case__select-" + idHash("Mixed Case", "select", "outline"):            {"Mixed Case", "select", "outline", "table", "Polygon", 4326, false, true, "Order:integer", false},
		"Mixed_Case__select__centroid-" + idHash("Mixed Case", "select", "centroid"): {"Mixed Case", "select", "centroid", "table", "Point", 4326, false, false, "Order:integer", false},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Discover() layers (-want +got):\n%s", diff)
	}
	for _, l := range ls {
		if l.Schema == "geogate" {
			t.Errorf("geogate's own %s.%s is published", l.Schema, l.Table)
		}
		if strings.ContainsAny(l.ID, ". /") {
			t.Errorf("layer id %q holds a character QGIS or a URL mishandles", l.ID)
		}
	}
}

// TestDiscoverProperties: every column but the geometries, in its order,
// with its JSON type.
func TestDiscoverProperties(t *testing.T) {
	db := testenv.UserDB(t)
	ls, err := Discover(context.Background(), db, userSettings())
	if err != nil {
		t.Fatal(err)
	}
	byTable := map[string][]string{}
	for _, l := range ls {
		var ps []string
		for _, p := range l.Properties {
			ps = append(ps, strings.TrimSuffix(p.Name+":"+p.Type+":"+p.Format, ":"))
		}
		byTable[l.Table+"."+l.Column] = ps
	}
	want := map[string][]string{
		"roads.geom":         {"gid:integer", "ref:string", "lanes:integer", "oneway:boolean", "opened:string:date", "tags:json"},
		"Bus Stops.geom":     {"stop_code:string", "Name:string", "wheelchair:boolean", "routes:array", "updated:string:date-time"},
		"parcels.geom":       {"parcel_id:integer", "owner:string", "area_sqft:number", "assessed:number"},
		"select.outline":     {"Order:integer", "from:string", "Where Clause:string"},
		"select.centroid":    {"Order:integer", "from:string", "Where Clause:string"},
		"airports.geog":      {"iata:string", "name:string", "elevation_m:integer"},
		"french_cities.geom": {"id:integer", "name:string", "region:string"},
	}
	for table, w := range want {
		if diff := cmp.Diff(w, byTable[table]); diff != "" {
			t.Errorf("properties of %s (-want +got):\n%s", table, diff)
		}
	}
}

// TestDiscoverBounds: layers with statistics report an estimated extent in
// longitude and latitude, whatever their SRID: it holds the centre of the
// layer's true extent and is not much larger. (A box in a projected SRID
// seen in longitude and latitude covers more than the features.)
func TestDiscoverBounds(t *testing.T) {
	db := testenv.UserDB(t)
	ls, err := Discover(context.Background(), db, userSettings())
	if err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"roads", "Bus Stops", "parcels", "million", "places"} {
		i := slices.IndexFunc(ls, func(l *Layer) bool { return l.Table == table })
		if i < 0 {
			t.Fatalf("no layer of %s", table)
		}
		l := ls[i]
		var t0 Bounds
		err := db.QueryRow(context.Background(), `SELECT ST_XMin(e), ST_YMin(e), ST_XMax(e), ST_YMax(e)
			FROM (SELECT ST_Extent(ST_Transform(`+quoteIdent(l.Column)+`, 4326)) AS e FROM `+l.Qualified()+`) x`).
			Scan(&t0.West, &t0.South, &t0.East, &t0.North)
		if err != nil {
			t.Fatal(err)
		}
		b := l.Bounds
		cx, cy := (t0.West+t0.East)/2, (t0.South+t0.North)/2
		if b == nil || cx < b.West || cx > b.East || cy < b.South || cy > b.North ||
			(b.East-b.West) > 2*(t0.East-t0.West)+20 || (b.North-b.South) > 2*(t0.North-t0.South)+20 {
			t.Errorf("bounds of %s = %+v, want a box about the true extent %+v", table, b, t0)
		}
	}
}

// TestDiscoverIncludeExclude: patterns narrow what is published.
func TestDiscoverIncludeExclude(t *testing.T) {
	db := testenv.UserDB(t)
	for _, tc := range []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"IncludeSchema", []string{"transit.*"}, nil, []string{"Bus Stops"}},
		{"IncludeIDs", []string{"road*", "parcels"}, nil, []string{"parcels", "roads"}},
		{"ExcludeViews", []string{"*"}, []string{"french_cities", "city_buffers", "country_centres", "public.m*", "transit.*", "Mixed Case.*", "public.s*"},
			[]string{"airports", "countries", "geofences", "landmarks", "parcels", "places", "roads", "zones"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := userSettings()
			s.Include, s.Exclude = tc.include, tc.exclude
			ls, err := Discover(context.Background(), db, s)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range ls {
				if !slices.Contains(got, l.Table) {
					got = append(got, l.Table)
				}
			}
			slices.Sort(got)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("tables = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDiscoverPrivileges: a role sees only what it may SELECT.
func TestDiscoverPrivileges(t *testing.T) {
	db := testenv.UserDB(t)
	ctx := context.Background()
	role := "reader_" + testenv.Prefix(t)
	for _, sql := range []string{
		"CREATE ROLE " + role,
		"GRANT USAGE ON SCHEMA public TO " + role,
		"GRANT SELECT ON public.roads, public.parcels TO " + role,
		"GRANT SELECT ON ALL TABLES IN SCHEMA geogate TO " + role,
	} {
		if _, err := db.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _, _ = db.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role) })
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SET ROLE "+role); err != nil {
		t.Fatal(err)
	}
	defer conn.Exec(context.Background(), "RESET ROLE") //nolint:errcheck
	var tables []string
	rows, err := conn.Query(ctx, geometryColumnsSQL, testenv.UserSchemas)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		vals, _ := rows.Values()
		tables = append(tables, fmt.Sprint(vals[2]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(tables) != "[parcels roads]" {
		t.Errorf("a role that may read roads and parcels sees %v", tables)
	}
}
