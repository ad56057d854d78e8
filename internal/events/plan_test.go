package events_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/testenv"
)

var removed = regexp.MustCompile(`Rows Removed by (?:Join )?Filter: (\d+)`)

// TestReportPlansWithStaleStatistics: statistics taken while the stays
// and the devices were none, then 5,000 of each. A report still looks up
// each of its devices by the whole key, in the plan made for the values
// and in the generic one, and reads no other row.
func TestReportPlansWithStaleStatistics(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	sub := subscribe(t, svc, "key:one", events.Subscription{Kinds: []events.Kind{events.Enter, events.Exit}})
	for _, sql := range []string{
		`ANALYZE geogate.event_memberships, geogate.event_devices`,
		`INSERT INTO geogate.event_devices (owner, device) SELECT 'key:one', 'd' || i FROM generate_series(1, 5000) i`,
		`INSERT INTO geogate.event_memberships (subscription, device, fence, entered_at)
SELECT '` + sub + `'::uuid, 'd' || i, (i % 500)::text, now() FROM generate_series(1, 5000) i`,
	} {
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	var devs, subs, owners, fences, times, coords []string
	for i := 1; i <= 100; i++ {
		devs, subs, owners = append(devs, fmt.Sprintf("d%d", i*7)), append(subs, sub), append(owners, "key:one")
		fences, times, coords = append(fences, fmt.Sprint(i*7%500)), append(times, "2026-01-01T00:00:00Z"), append(coords, "0")
	}
	tests := []struct {
		name, sql, types string
		args             []string
		cond             *regexp.Regexp
	}{
		{"stays", events.LoadStaysSQL, "text[], text[]", []string{array(subs), array(devs)},
			regexp.MustCompile(`Index Cond: \(\(subscription = k\.s\) AND \(device = k\.d\)\)`)},
		{"devices", events.LockDevicesSQL, "text[], text[]", []string{array(owners), array(devs)},
			regexp.MustCompile(`Index Cond: \(\(owner = k\.o\) AND \(device = k\.d\)\)`)},
		{"moving devices", events.UpdateDevicesSQL, "text[], text[], timestamptz[], float8[], float8[], float8[]",
			[]string{array(owners), array(devs), array(times), array(coords), array(coords), array(coords)},
			regexp.MustCompile(`Index Cond: \(\(owner = u\.o\) AND \(device = u\.d\)\)`)},
		{"ending stays", events.EndStaysSQL, "text[], text[], text[]", []string{array(subs), array(devs), array(fences)},
			regexp.MustCompile(`Index Cond: \(\(subscription = g\.s\) AND \(device = g\.d\)\)`)},
	}
	for _, tt := range tests {
		for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
			t.Run(tt.name+"/"+mode, func(t *testing.T) {
				plan := explain(t, pool, mode, tt.sql, tt.types, tt.args)
				if !tt.cond.MatchString(plan) {
					t.Errorf("no look-up by the whole key (%s) in the plan:\n%s", tt.cond, plan)
				}
				// Each device has one stay: a look-up by the key reads
				// nothing it then leaves out.
				for _, m := range removed.FindAllStringSubmatch(plan, -1) {
					if m[1] != "0" {
						t.Errorf("the plan read %s rows it left out:\n%s", m[1], plan)
					}
				}
				if want := "rows=100 loops=1"; !strings.Contains(plan, want) {
					t.Errorf("the plan does not find the 100 rows once each (%s):\n%s", want, plan)
				}
			})
		}
	}
}

// array writes ss as an SQL literal of a text array; none of them holds
// a quote, a comma or a brace.
func array(ss []string) string { return "'{" + strings.Join(ss, ",") + "}'" }

// explain runs sql, prepared with parameters of the given types, on the
// literals args, under a report's settings and plan_cache_mode mode, and
// returns its plan.
func explain(t *testing.T, pool *pgxpool.Pool, mode, sql, types string, args []string) string {
	t.Helper()
	return explainAfter(t, pool, []string{events.SmallJoinsSQL, "SET LOCAL plan_cache_mode = " + mode}, sql, types, args)
}

// explainAfter runs sql as explain does, in a transaction that first ran
// the statements setup, and returns its plan.
func explainAfter(t *testing.T, pool *pgxpool.Pool, setup []string, sql, types string, args []string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	for _, s := range append(setup, "PREPARE st("+types+") AS "+sql) {
		if _, err := tx.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// A prepared statement outlives the transaction.
	defer tx.Exec(ctx, "DEALLOCATE st") //nolint:errcheck
	rows, err := tx.Query(ctx, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE st("+strings.Join(args, ", ")+")")
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
