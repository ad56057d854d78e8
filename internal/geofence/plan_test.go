package geofence

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
	"github.com/geogate/geogate/internal/testenv"
)

// planNode is the part of EXPLAIN (FORMAT JSON) the plan test reads.
type planNode struct {
	NodeType   string     `json:"Node Type"`
	IndexName  string     `json:"Index Name"`
	Relation   string     `json:"Relation Name"`
	OrderBy    string     `json:"Order By"`
	ActualRows float64    `json:"Actual Rows"`
	Plans      []planNode `json:"Plans"`
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}

// TestWithinPlanUsesIndexWithoutSortingEveryMatch reads the executed plan
// of /within, 100 km around a dense area (20,000 places, every one a
// match): both scans of places go through the table's own GiST index on
// geom, the first in KNN order, and no Sort sees more than a page's worth
// of rows. It checks the custom plan of a first execution and
// the generic plan prepared statements switch to.
func TestWithinPlanUsesIndexWithoutSortingEveryMatch(t *testing.T) {
	t.Parallel()
	pool := newDB(t)
	svc, _ := newTestService(t, pool, testTimeouts)
	mustExec(t, pool, `INSERT INTO places (name, geom)
		SELECT 'p' || i, ST_SetSRID(ST_MakePoint(2.35 + (random() - 0.5) * 0.8, 48.85 + (random() - 0.5) * 0.5), 4326)
		FROM generate_series(1, 20000) i`)
	mustExec(t, pool, "ANALYZE places")
	checkWithinPlan(t, pool, svc, WithinQuery{Layer: "places", Lng: 2.35, Lat: 48.85, Radius: 100_000, Limit: 100})
}

// checkWithinPlan executes the /within statement of q under EXPLAIN
// ANALYZE, with a custom and with a generic plan, and checks that places is
// only read through its geometry index places_geom_idx (the bound's scan in
// KNN order) and that no Sort sees more than a few pages of rows.
func checkWithinPlan(t *testing.T, pool *pgxpool.Pool, svc *Service, q WithinQuery) {
	t.Helper()
	sql, args, _ := svc.WithinSQL(q)

	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "PREPARE within_plan AS "+sql); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		t.Run(mode, func(t *testing.T) {
			if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
				t.Fatal(err)
			}
			var literal []string
			for _, a := range args {
				literal = append(literal, sqlLiteral(a))
			}
			var out []byte
			q := fmt.Sprintf("EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE within_plan(%s)", strings.Join(literal, ", "))
			if err := conn.QueryRow(ctx, q).Scan(&out); err != nil {
				t.Fatal(err)
			}
			var plans []struct {
				Plan planNode `json:"Plan"`
			}
			if err := json.Unmarshal(out, &plans); err != nil {
				t.Fatal(err)
			}
			var indexScans, knn int
			plans[0].Plan.walk(func(n planNode) {
				switch {
				case n.Relation == "places" && n.NodeType != "Index Scan" && n.NodeType != "Bitmap Heap Scan":
					t.Errorf("%s on places, want only index scans", n.NodeType)
				case (n.NodeType == "Index Scan" || n.NodeType == "Bitmap Index Scan") && n.IndexName != "":
					if n.IndexName != "places_geom_idx" {
						t.Errorf("a scan of %s, want places_geom_idx", n.IndexName)
					}
					indexScans++
					if len(n.OrderBy) > 0 {
						knn++
					}
				case n.NodeType == "Sort" && n.ActualRows > 300:
					t.Errorf("a Sort of %v rows, want at most a page (101) plus a few", n.ActualRows)
				}
			})
			if indexScans != 2 || knn != 1 {
				t.Errorf("index scans on places_geom_idx = %d (%d KNN), want 2 (1 KNN)\n%s", indexScans, knn, out)
			}
		})
	}
}

// sqlLiteral renders a /within argument for EXECUTE.
func sqlLiteral(a any) string {
	switch v := a.(type) {
	case nil:
		return "NULL"
	case float64:
		return fmt.Sprintf("%v::float8", v)
	case int:
		return fmt.Sprint(v)
	case []string:
		return "NULL" // property lists do not change the plan's shape
	}
	return fmt.Sprintf("'%v'", a)
}

// TestWithinPlannedOnce runs /within at many radii on one connection of a
// pool that plans statements once (as api serve's does): PostgreSQL's
// pg_prepared_statements shows the statement planned generically every
// time, never per call, and the plan read above (checkWithinPlan) is the
// generic one too.
func TestWithinPlannedOnce(t *testing.T) {
	t.Parallel()
	_, url := testenv.DBWithURL(t)
	pool, err := pg.Open(context.Background(), url, pg.Options{MaxConns: 1, GenericPlans: true, Schema: "geogate"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	svc, h := newTestService(t, pool, testTimeouts)
	radii := []float64{50, 500, 5000, 20000, 100000, 1000, 75}
	for _, r := range radii {
		if code, body := do(t, h, "GET", withinURL(13.4, 52.5, r, ""), ""); code != 200 {
			t.Fatalf("GET /within radius %v = %d %s", r, code, body)
		}
	}
	sql, _, _ := svc.WithinSQL(WithinQuery{Layer: "places", Lng: 13.4, Lat: 52.5, Radius: 500, Limit: 10})
	var generic, custom int64
	err = pool.QueryRow(context.Background(),
		"SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1", sql).Scan(&generic, &custom)
	if err != nil {
		t.Fatalf("the /within statement in pg_prepared_statements: %v", err)
	}
	if custom != 0 || generic != int64(len(radii)) {
		t.Errorf("/within planned generically %d times and per call %d times, want %d and 0", generic, custom, len(radii))
	}
}
