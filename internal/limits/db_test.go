package limits

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/testenv"
)

// tierWindows is what limiter l gives tier under geofence, as a string.
func tierWindows(l *ratelimit.Limiter, tier string) string {
	p, _ := l.Policy("geofence")
	return windows(p.Tiers[tier])
}

// listenerPids are the backends of db's database holding the overrides'
// LISTEN, as the last statement they ran says.
func listenerPids(t *testing.T, db *pgxpool.Pool) []int32 {
	t.Helper()
	rows, err := db.Query(context.Background(), `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN geogate_limits%' ORDER BY pid`)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int32
	for rows.Next() {
		var pid int32
		if err := rows.Scan(&pid); err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// TestOverridesFollowTheDatabase runs a Source on a real database and a
// real (in-process) limiter: a tier override written with plain SQL holds
// within a second; one written while the listener's connection is cut
// holds once it is back; and a poll alone catches a change too.
func TestOverridesFollowTheDatabase(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := testenv.DB(t)
	base := map[string]ratelimit.Policy{"geofence": ratelimit.NewPolicy("geofence", ratelimit.Window{Limit: 10, Period: time.Second})}
	l, err := ratelimit.New(nil, base, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := New(l, base, "builtin", FromDB(db, func(id string) string { return "key:" + id }), log, prometheus.NewRegistry())
	go s.Run(ctx, Listen(db, log), time.Hour)
	testenv.WaitFor(t, 10*time.Second, "the listener", func() bool { return len(listenerPids(t, db)) == 1 })

	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO tier_overrides (tier, policy, windows) VALUES ('gold', 'geofence', '5/1s')`)
	testenv.WaitFor(t, time.Second, "the gold tier's override", func() bool { return tierWindows(l, "gold") == "5/1s" })

	before := listenerPids(t, db)
	exec(`SELECT pg_terminate_backend($1)`, before[0])
	exec(`UPDATE tier_overrides SET windows = '7/1s' WHERE tier = 'gold'`)
	testenv.WaitFor(t, 10*time.Second, "the change made while the listener was cut off", func() bool {
		return tierWindows(l, "gold") == "7/1s"
	})
	testenv.WaitFor(t, 10*time.Second, "a new listener", func() bool {
		now := listenerPids(t, db)
		return len(now) == 1 && now[0] != before[0]
	})
	exec(`DELETE FROM tier_overrides`)
	testenv.WaitFor(t, time.Second, "the override removed", func() bool { return tierWindows(l, "gold") == "" })

	// With no listener at all, the poll brings the change.
	polled := New(l, base, "builtin", FromDB(db, func(id string) string { return "key:" + id }), log, prometheus.NewRegistry())
	go polled.Run(ctx, func(context.Context, func()) {}, 100*time.Millisecond)
	exec(`INSERT INTO tier_overrides (tier, policy, windows) VALUES ('silver', 'geofence', '3/1s')`)
	testenv.WaitFor(t, 5*time.Second, "the polled override", func() bool { return tierWindows(l, "silver") == "3/1s" })
}

// TestSetBaseRefusesWhatTheLimiterRefuses: a base that drops a policy is
// refused, the running policies and version stay, and the metrics say so.
func TestSetBaseRefusesWhatTheLimiterRefuses(t *testing.T) {
	geo := ratelimit.NewPolicy("geofence", ratelimit.Window{Limit: 10, Period: time.Second})
	tiles := ratelimit.NewPolicy("tiles", ratelimit.Window{Limit: 100, Period: time.Second})
	base := map[string]ratelimit.Policy{"geofence": geo, "tiles": tiles}
	l, err := ratelimit.New(nil, base, ratelimit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(l, base, "v1", func(context.Context) ([]Override, error) { return nil, nil }, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err := s.SetBase(map[string]ratelimit.Policy{"geofence": geo}, "v2"); err == nil {
		t.Fatal("a base without tiles was accepted")
	}
	if s.Version() != "v1" {
		t.Errorf("version = %s after a refused base, want v1", s.Version())
	}
	geo.Windows = []ratelimit.Window{{Limit: 20, Period: time.Second}}
	if err := s.SetBase(map[string]ratelimit.Policy{"geofence": geo, "tiles": tiles}, "v2"); err != nil {
		t.Fatal(err)
	}
	if p, _ := l.Policy("geofence"); s.Version() != "v2" || p.Windows[0].Limit != 20 {
		t.Errorf("after SetBase: version %s, geofence %v; want v2 and 20/1s", s.Version(), p.Windows)
	}
}
