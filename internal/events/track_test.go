package events_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/events"
	"github.com/geogate/geogate/internal/testenv"
)

// readTrack pages through q's whole track, limit positions at a time:
// each position as "<seconds after at(0)>" with "L" when late and its
// accuracy when it has one.
func readTrack(t *testing.T, svc *events.Service, owner string, q events.TrackQuery) []string {
	t.Helper()
	var out []string
	for pages := 0; ; pages++ {
		ps, next, err := svc.Track(context.Background(), owner, q)
		if err != nil {
			t.Fatalf("Track(%+v) = %v", q, err)
		}
		if len(ps) > q.Limit {
			t.Fatalf("Track gave %d positions, over its limit %d", len(ps), q.Limit)
		}
		if len(ps) == 0 {
			if next != nil {
				t.Fatalf("an empty page has the cursor %v", next)
			}
			return out
		}
		for _, p := range ps {
			s := fmt.Sprint(int64(p.Time.Sub(at(0)).Seconds()))
			if p.Late {
				s += "L"
			}
			if p.Accuracy != nil {
				s += fmt.Sprintf("~%g", *p.Accuracy)
			}
			if p.Received.IsZero() || p.Time.Location() != time.UTC {
				t.Errorf("position %+v: want a receipt time and times in UTC", p)
			}
			out = append(out, s)
		}
		// The cursor goes back as a client sends it: through its text.
		c, err := events.ParseTrackCursor(next.String())
		if err != nil || c.String() != next.String() {
			t.Fatalf("ParseTrackCursor(%q) = %v, %v", next.String(), c, err)
		}
		q.After = &c
		if pages > 100 {
			t.Fatal("the track does not end")
		}
	}
}

// TestTrack reads back what a device reported: in time order, a late
// position after the one it was late for, in pages of every size, within
// a time range, and never another owner's device of the same name.
func TestTrack(t *testing.T) {
	pool := testenv.DemoDB(t)
	ctx := context.Background()
	svc := newService(t, pool, testSettings)
	owner, other := "key:track-"+testenv.Prefix(t), "key:other-"+testenv.Prefix(t)
	acc := 7.5
	var ps []events.Position
	for i := range 5 {
		ps = append(ps, events.Position{Device: "bus", Time: at(i * 10), Lng: 13.4 + float64(i)/100, Lat: 52.5})
	}
	ps[2].Accuracy = &acc
	if _, err := svc.Report(ctx, owner, ps); err != nil {
		t.Fatal(err)
	}
	// Late: the time of an earlier position, and one between two.
	late := []events.Position{{Device: "bus", Time: at(10), Lng: 13.5, Lat: 52.5}, {Device: "bus", Time: at(25), Lng: 13.5, Lat: 52.5}}
	if r, err := svc.Report(ctx, owner, late); err != nil || r.Late != 2 {
		t.Fatalf("Report(late) = %+v, %v; want 2 late", r, err)
	}
	if _, err := svc.Report(ctx, other, []events.Position{{Device: "bus", Time: at(15), Lng: 1, Lat: 1}}); err != nil {
		t.Fatal(err)
	}
	from, to := at(10), at(30)
	tests := []struct {
		name     string
		q        events.TrackQuery
		want     string
		owner    string
		notFound bool
	}{
		{name: "whole, one page", q: events.TrackQuery{Device: "bus", Limit: 100}, want: "0 10 10L 20~7.5 25L 30 40"},
		{name: "pages of one", q: events.TrackQuery{Device: "bus", Limit: 1}, want: "0 10 10L 20~7.5 25L 30 40"},
		{name: "pages of two", q: events.TrackQuery{Device: "bus", Limit: 2}, want: "0 10 10L 20~7.5 25L 30 40"},
		{name: "from, to", q: events.TrackQuery{Device: "bus", From: &from, To: &to, Limit: 2}, want: "10 10L 20~7.5 25L"},
		{name: "from only", q: events.TrackQuery{Device: "bus", From: &to, Limit: 100}, want: "30 40"},
		{name: "to only", q: events.TrackQuery{Device: "bus", To: &from, Limit: 100}, want: "0"},
		{name: "the other owner's bus", q: events.TrackQuery{Device: "bus", Limit: 100}, owner: other, want: "15"},
		{name: "nothing in range", q: events.TrackQuery{Device: "bus", From: &to, To: &to, Limit: 100}, want: ""},
		{name: "unknown device", q: events.TrackQuery{Device: "tram", Limit: 100}, notFound: true},
		{name: "another owner's device", q: events.TrackQuery{Device: "bus", Limit: 100}, owner: "key:nobody-" + testenv.Prefix(t), notFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := owner
			if tt.owner != "" {
				o = tt.owner
			}
			if tt.notFound {
				_, _, err := svc.Track(ctx, o, tt.q)
				if apperr.KindOf(err) != apperr.NotFound {
					t.Fatalf("Track() = %v, want a not-found error", err)
				}
				return
			}
			if got := strings.Join(readTrack(t, svc, o, tt.q), " "); got != tt.want {
				t.Errorf("track = %q, want %q", got, tt.want)
			}
		})
	}
	// The cursors at either end of what a client may send are read, not
	// failed on by PostgreSQL.
	for _, c := range []string{"-62167219200000000_0", "253402300799999999_9223372036854775807"} {
		cur, err := events.ParseTrackCursor(c)
		if err != nil {
			t.Fatalf("ParseTrackCursor(%q) = %v", c, err)
		}
		if _, _, err := svc.Track(ctx, owner, events.TrackQuery{Device: "bus", After: &cur, Limit: 1}); err != nil {
			t.Errorf("Track after %s = %v", c, err)
		}
	}
}

// TestTrackReadsTheDeviceIndex checks that a page of one device's track
// reads that device's rows by the (owner, device, time) index, under a
// serving connection's generic plans and under custom ones.
func TestTrackReadsTheDeviceIndex(t *testing.T) {
	pool := testenv.DB(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO geogate.event_positions (owner, device, time, lng, lat)
SELECT 'key:t', 'd' || (g % 200), now() - make_interval(secs => g), 0, 0 FROM generate_series(1, 200000) g;
ANALYZE geogate.event_positions`); err != nil {
		t.Fatal(err)
	}
	const types = "text, text, timestamptz, timestamptz, timestamptz, bigint, int"
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		setup := []string{"SET LOCAL search_path = geogate", "SET LOCAL plan_cache_mode = " + mode}
		for name, args := range map[string][]string{
			"first page": {"'key:t'", "'d7'", "'-infinity'", "'infinity'", "'-infinity'", "0", "100"},
			"next page":  {"'key:t'", "'d7'", "'-infinity'", "'infinity'", "now() - interval '100000 seconds'", "5", "100"},
		} {
			plan := explainAfter(t, pool, setup, events.TrackSQL, types, args)
			if strings.Contains(plan, "Seq Scan") || !strings.Contains(plan, "Index Scan using event_positions_device_idx") {
				t.Errorf("%s, %s: the page does not read the device's index:\n%s", mode, name, plan)
			}
		}
	}
}

func TestParseTrackQuery(t *testing.T) {
	tests := []struct {
		query string
		want  string // the fields refused, or the query read
	}{
		{"device=bus", "bus from=- to=- after=- limit=100"},
		{"device=a%2Fb&limit=7", "a/b from=- to=- after=- limit=7"},
		{"device=bus&from=2026-06-01T12:00:00Z&to=2026-06-01T14:00:00%2B01:00&after=1780315200000000_9",
			"bus from=2026-06-01T12:00:00Z to=2026-06-01T13:00:00Z after=1780315200000000_9 limit=100"},
		{"", "refused: device"},
		{"device=%01", "refused: device"},
		{"device=" + strings.Repeat("x", 129), "refused: device"},
		{"device=bus&from=yesterday&to=2026", "refused: from to"},
		{"device=bus&from=2026-06-01T12:00:00Z&to=2026-06-01T12:00:00Z", "refused: to"},
		{"device=bus&after=12", "refused: after"},
		{"device=bus&after=x_1", "refused: after"},
		{"device=bus&after=1_-1", "refused: after"},
		{"device=bus&after=-9223372036854775808_1", "refused: after"},
		{"device=bus&after=253402300800000000_1", "refused: after"},
		{"device=bus&after=253402300799999999_1", "bus from=- to=- after=253402300799999999_1 limit=100"},
		{"device=bus&from=0000-01-01T00:00:00Z", "bus from=0000-01-01T00:00:00Z to=- after=- limit=100"},
		{"device=bus&limit=0", "refused: limit"},
		{"device=bus&limit=1001", "refused: limit"},
		{"device=bus&limit=ten", "refused: limit"},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			v, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			q, err := events.ParseTrackQuery(v.Get, 1000)
			var got string
			if err != nil {
				ve, ok := err.(*apperr.ValidationError)
				if !ok {
					t.Fatalf("ParseTrackQuery() = %T %v, want a validation error", err, err)
				}
				var fields []string
				for _, f := range ve.Fields {
					fields = append(fields, fmt.Sprint(f.Loc[len(f.Loc)-1]))
				}
				got = "refused: " + strings.Join(fields, " ")
			} else {
				got = fmt.Sprintf("%s from=%s to=%s after=%s limit=%d", q.Device, timeOrDash(q.From), timeOrDash(q.To), cursorOrDash(q.After), q.Limit)
			}
			if got != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func cursorOrDash(c *events.TrackCursor) string {
	if c == nil {
		return "-"
	}
	return c.String()
}
