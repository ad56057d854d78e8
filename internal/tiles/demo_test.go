package tiles

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// TestTileJSONFieldsInDemoTiles checks that what TileJSON advertises is
// what tiles carry on the demo data: every field in a layer's
// vector_layers is a property of at least one feature of every non-empty
// tile fetched, at several zooms.
func TestTileJSONFieldsInDemoTiles(t *testing.T) {
	t.Parallel()
	db := demoDB(t)
	rp := newReplica(t, db, nil, "", replicaOptions{})
	tiles := []Tile{{0, 0, 0}, tileOf(13.41, 52.52, 4), tileOf(2.35, 48.85, 8), tileOf(13.41, 52.52, 12)}
	for _, layer := range []string{"places", "geofences"} {
		t.Run(layer, func(t *testing.T) {
			w := rp.get(t, "/tiles/"+layer+".json")
			var tj TileJSON
			if err := json.Unmarshal(w.Body.Bytes(), &tj); w.Code != http.StatusOK || err != nil || len(tj.VectorLayers) != 1 {
				t.Fatalf("GET /tiles/%s.json = %d %s (%v), want one vector layer", layer, w.Code, w.Body, err)
			}
			advertised := tj.VectorLayers[0].Fields
			if len(advertised) == 0 {
				t.Fatalf("vector_layers[0].fields is empty; want the layer's fields")
			}
			for _, tl := range tiles {
				w := rp.get(t, tilePath(layer, tl))
				if w.Code != http.StatusOK {
					t.Fatalf("GET %s = %d, want a non-empty demo tile", tilePath(layer, tl), w.Code)
				}
				seen := map[string]bool{}
				n := 0
				for _, l := range decode(t, w.Body.Bytes(), tl) {
					for _, f := range l.Features {
						n++
						for k := range f.Properties {
							seen[k] = true
						}
					}
				}
				for field := range advertised {
					if !seen[field] {
						t.Errorf("tile %s: TileJSON advertises field %q but none of its %d features has it; properties seen: %v",
							tl, field, n, keys(seen))
					}
				}
			}
		})
	}
}

// TestTileSQLUsesSpatialIndex checks on the demo data that each layer's
// tile query for a z12 tile (and, for thinned points, a z8 tile) finds its
// rows through the layer's GiST index on the geometry column, and computes
// each feature's ST_AsMVTGeom once (not again in a filter).
func TestTileSQLUsesSpatialIndex(t *testing.T) {
	t.Parallel()
	db := demoDB(t)
	ctx := context.Background()
	// The plans are read from statistics: make them this database's own,
	// whatever the clone brought along.
	if _, err := db.Exec(ctx, "ANALYZE places; ANALYZE geofences"); err != nil {
		t.Fatal(err)
	}
	r := newRenderer(t, db, DefaultSettings())
	tests := []struct {
		layer string
		tile  Tile
	}{
		{"places", tileOf(13.41, 52.52, 12)},
		{"places", tileOf(13.41, 52.52, 8)},
		{"geofences", tileOf(13.41, 52.52, 12)},
	}
	for _, tt := range tests {
		t.Run(tt.layer+"/"+tt.tile.String(), func(t *testing.T) {
			l := layer(t, r, tt.layer)
			var index string
			err := db.QueryRow(ctx, `
				SELECT ic.relname FROM pg_index i
				JOIN pg_class ic ON ic.oid = i.indexrelid
				JOIN pg_am am ON am.oid = ic.relam
				JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
				WHERE i.indrelid = $1::regclass AND am.amname = 'gist' AND i.indnkeyatts = 1
				  AND i.indexprs IS NULL AND a.attname = $2`, l.Source().Qualified(), l.Source().Column).Scan(&index)
			if err != nil {
				t.Fatalf("finding the GiST index on %s: %v", l.Source(), err)
			}
			sql, args := r.SQL(l, tt.tile)
			for mode, plan := range explain(t, db, sql, args) {
				// The service's pools plan every statement once, generically
				// (pg.Options.GenericPlans): that is the plan that must use
				// the index. A custom plan for a wide thinned tile may
				// rightly prefer a parallel scan on some statistics.
				if mode == "generic" && !strings.Contains(plan, "Index Scan using "+index+" ") && !strings.Contains(plan, "Bitmap Index Scan on "+index) &&
					!strings.Contains(plan, "Index Only Scan using "+index+" ") {
					t.Errorf("the %s plan of the %s query for %s does not scan %s:\n%s", mode, l.ID, tt.tile, index, plan)
				}
				if n := strings.Count(plan, "st_asmvtgeom("); n != 1 {
					t.Errorf("the %s plan of the %s query for %s computes st_asmvtgeom in %d places, want 1:\n%s", mode, l.ID, tt.tile, n, plan)
				}
			}
		})
	}
}

// explain returns the plans of sql with args: the custom plan made for
// these values, and the generic plan that a prepared statement (as pgx
// runs them) may switch to after a few executions.
func explain(t *testing.T, db *pgxpool.Pool, sql string, args []any) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	lines := func(q string, args ...any) string {
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			t.Fatalf("%.60s...: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("%.60s...: %v", q, err)
		}
		return strings.Join(plan, "\n")
	}
	out := map[string]string{"custom": lines("EXPLAIN (VERBOSE) "+sql, args...)}
	literals := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int:
			literals[i] = strconv.Itoa(v)
		case float64:
			literals[i] = strconv.FormatFloat(v, 'g', -1, 64)
		default:
			t.Fatalf("argument %d is a %T; want int or float64", i+1, a)
		}
	}
	for _, q := range []string{"PREPARE tile_plan AS " + sql, "SET plan_cache_mode = force_generic_plan"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%.60s...: %v", q, err)
		}
	}
	out["generic"] = lines("EXPLAIN (VERBOSE) EXECUTE tile_plan(" + strings.Join(literals, ", ") + ")")
	if _, err := conn.Exec(ctx, "DEALLOCATE tile_plan; RESET plan_cache_mode"); err != nil {
		t.Fatal(err)
	}
	return out
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
