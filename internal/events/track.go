package events

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/pg"
)

// TrackPosition is one recorded position of a device, as GET /positions
// reads it back.
type TrackPosition struct {
	Time     time.Time `json:"time"`
	Lng      float64   `json:"lng"`
	Lat      float64   `json:"lat"`
	Accuracy *float64  `json:"accuracy,omitempty"`
	Speed    *float64  `json:"speed,omitempty"`
	Heading  *float64  `json:"heading,omitempty"`
	// Late: older than the device's last position when it arrived, so it
	// caused no transition.
	Late     bool      `json:"late"`
	Received time.Time `json:"receivedAt"`
	id       int64
}

// TrackQuery asks for a page of one device's positions, in the order of
// their time (then of their arrival), with From <= time < To.
type TrackQuery struct {
	Device   string
	From, To *time.Time // nil: unbounded
	After    *TrackCursor
	Limit    int
}

// TrackCursor is where a page of a track ended: the time and the row of
// its last position. Rows of one time are read in arrival order, so a
// cursor splits even a run of positions with one time.
type TrackCursor struct {
	Time time.Time
	id   int64
}

// String is the cursor as a client passes it back: microseconds since
// the epoch (the resolution PostgreSQL keeps), "_", the row.
func (c TrackCursor) String() string {
	return strconv.FormatInt(c.Time.UnixMicro(), 10) + "_" + strconv.FormatInt(c.id, 10)
}

// The times a cursor may hold: those RFC 3339 can write, as every
// recorded position's time was. Beyond them PostgreSQL's timestamptz
// ends, and a made-up cursor would fail there rather than here.
var (
	firstCursorTime = time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
	lastCursorTime  = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC).UnixMicro()
)

// ParseTrackCursor reads a cursor that String wrote.
func ParseTrackCursor(s string) (TrackCursor, error) {
	us, id, ok := strings.Cut(s, "_")
	t, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n < 0 || t < firstCursorTime || t > lastCursorTime {
		return TrackCursor{}, errors.New("not a positions cursor")
	}
	return TrackCursor{Time: time.UnixMicro(t).UTC(), id: n}, nil
}

var errNoDevice = apperr.New(apperr.NotFound, "No such device: GET /devices lists yours.")

// trackSQL reads a page of a track along the (owner, device, time) index:
// the time bounds and the cursor's time are index conditions, and the
// row comparison only splits the cursor's own time.
const trackSQL = `SELECT id, time, lng, lat, accuracy, speed, heading, late, received_at
FROM event_positions
WHERE owner = $1 AND device = $2 AND time >= $3 AND time < $4
  AND time >= $5 AND (time, id) > ($5, $6)
ORDER BY time, id LIMIT $7`

// Track returns a page of owner's device's recorded positions, and the
// cursor after its last one (nil when the page is empty). A device that
// owner never reported is errNoDevice; one whose positions were all
// pruned has an empty track.
func (s *Service) Track(ctx context.Context, owner string, q TrackQuery) ([]TrackPosition, *TrackCursor, error) {
	from, to := bound(q.From, pgtype.NegativeInfinity), bound(q.To, pgtype.Infinity)
	after, afterID := bound(nil, pgtype.NegativeInfinity), int64(0)
	if q.After != nil {
		after, afterID = bound(&q.After.Time, 0), q.After.id
	}
	out := []TrackPosition{}
	err := s.db.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		// The device's existence goes with the page, in one round trip:
		// a follower at the end of a track asks for empty pages often.
		b := &pgx.Batch{}
		b.Queue(trackSQL, owner, q.Device, from, to, after, afterID, q.Limit)
		b.Queue(`SELECT EXISTS (SELECT FROM event_devices WHERE owner = $1 AND device = $2)`, owner, q.Device)
		br := conn.SendBatch(ctx, b)
		defer br.Close()
		rows, err := br.Query()
		if err != nil {
			return err
		}
		var p TrackPosition
		_, err = pgx.ForEachRow(rows, []any{&p.id, &p.Time, &p.Lng, &p.Lat, &p.Accuracy, &p.Speed, &p.Heading, &p.Late, &p.Received}, func() error {
			p.Time, p.Received = p.Time.UTC(), p.Received.UTC()
			out = append(out, p)
			p = TrackPosition{} // a nil optional makes the next scan allocate, not write through this row's
			return nil
		})
		if err != nil {
			return err
		}
		var known bool
		if err := br.QueryRow().Scan(&known); err != nil {
			return err
		}
		if !known {
			return errNoDevice
		}
		return br.Close()
	})
	if err != nil || len(out) == 0 {
		return out, nil, err
	}
	last := out[len(out)-1]
	return out, &TrackCursor{Time: last.Time, id: last.id}, nil
}

// bound is t as a timestamptz parameter, or the infinity inf when t is nil.
func bound(t *time.Time, inf pgtype.InfinityModifier) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{InfinityModifier: inf, Valid: true}
	}
	return pgtype.Timestamptz{Time: *t, Valid: true}
}

// ParseTrackQuery reads GET /positions's parameters: device (required),
// from and to (RFC 3339), after (a cursor) and limit (1 to max).
func ParseTrackQuery(get func(string) string, max int) (TrackQuery, error) {
	errs := &apperr.ValidationError{}
	q := TrackQuery{Device: get("device")}
	switch {
	case q.Device == "":
		errs.Add("Field required: the id of one of your devices.", "missing", "query", "device")
	case !validDeviceID(q.Device):
		errs.Add(deviceIDRule, "value_error", "query", "device")
	}
	q.From = parseTime(get("from"), errs, "from")
	q.To = parseTime(get("to"), errs, "to")
	if q.From != nil && q.To != nil && !q.To.After(*q.From) {
		errs.Add("Must be later than from.", "value_error", "query", "to")
	}
	if a := get("after"); a != "" {
		c, err := ParseTrackCursor(a)
		if err != nil {
			errs.Add("Must be a cursor from an earlier page's next, or omitted.", "value_error", "query", "after")
		}
		q.After = &c
	}
	q.Limit = pageLimit(get("limit"), max, errs)
	return q, errs.Err()
}

func parseTime(v string, errs *apperr.ValidationError, name string) *time.Time {
	if v == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		errs.Add("Must be an RFC 3339 time, such as 2026-05-04T10:00:00Z.", "value_error", "query", name)
		return nil
	}
	return &t
}
