package events

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Subscription ids go to PostgreSQL as text[] and are cast there: pgx
// has no binary plan from a Go string to a uuid, and its fallback to text
// builds an error for every element first.

// loadStaysSQL reads the stays of the (subscription, device) pairs $1, $2.
// It joins a list of pairs rather than testing "= ANY" on each column:
// the planner prices a look-up for each element of an ANY list, and with
// statistics taken while the stays were few it chose to read all of a
// subscription's stays and test each against every device of the batch;
// given two lists, it looked up each device in every subscription.
const loadStaysSQL = `
SELECT m.subscription::text, m.device, m.fence, m.entered_at, m.dwelled
FROM unnest($1::text[]::uuid[], $2::text[]) k(s, d)
JOIN event_memberships m ON m.subscription = k.s AND m.device = k.d`

// stayPairs are the (subscription, device) pairs whose stays a report
// reads: each device of ps in each subscription of ws that watches it.
func stayPairs(ws []watch, ps []Position) (subs, devs []string) {
	ids := deviceIDs(ps)
	for _, w := range ws {
		for _, d := range ids {
			if w.watches(d) {
				subs, devs = append(subs, w.id), append(devs, d)
			}
		}
	}
	return subs, devs
}

// readStays reads the rows of loadStaysSQL.
func readStays(rows pgx.Rows, out map[stayKey]stay) error {
	var k stayKey
	var st stay
	_, err := pgx.ForEachRow(rows, []any{&k.sub, &k.device, &k.fence, &st.since, &st.dwelled}, func() error {
		out[k] = st
		return nil
	})
	return err
}

// endStaysSQL deletes the stays ($1, $2, $3) and returns those it found.
// It finds them by subscription and device, then tests the fence: "IS
// NOT DISTINCT FROM" is "=" here (no column is null) but no index can
// answer it, so the planner cannot look the stays up by their fence
// instead, which with stale statistics it did, reading every device
// inside that fence for each stay ended.
const endStaysSQL = `
DELETE FROM event_memberships m
USING unnest($1::text[]::uuid[], $2::text[], $3::text[]) AS g(s, d, f)
WHERE m.subscription = g.s AND m.device = g.d AND m.fence IS NOT DISTINCT FROM g.f
RETURNING m.subscription::text, m.device, m.fence`

// endStays deletes the stays of before that after no longer has as they
// were (ended, or changed: commit writes them anew). It returns those it
// found gone already: a fence's exit trigger ended them after the report
// read them (and wrote their exits), so they are not written again and
// the report tells nothing more of them.
func endStays(ctx context.Context, tx querier, before, after map[stayKey]stay) (map[stayKey]bool, error) {
	var gone []stayKey
	for k, b := range before {
		if a, ok := after[k]; !ok || a != b {
			gone = append(gone, k)
		}
	}
	lost := map[stayKey]bool{}
	if len(gone) == 0 {
		return lost, nil
	}
	subs, devs, fences := columns(gone)
	rows, err := tx.Query(ctx, endStaysSQL, subs, devs, fences)
	if err != nil {
		return nil, err
	}
	found := map[stayKey]bool{}
	var k stayKey
	if _, err := pgx.ForEachRow(rows, []any{&k.sub, &k.device, &k.fence}, func() error {
		found[k] = true
		return nil
	}); err != nil {
		return nil, err
	}
	for _, k := range gone {
		if !found[k] {
			lost[k] = true
		}
	}
	return lost, nil
}

func columns(ks []stayKey) (subs, devs, fences []string) {
	for _, k := range ks {
		subs, devs, fences = append(subs, k.sub), append(devs, k.device), append(fences, k.fence)
	}
	return subs, devs, fences
}
