package ratelimit

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A tally counts, per identity, policy and UTC day, the requests the
// deciding script admitted and refused: a hash beside the identity's
// sliding-window key, in its Cluster slot, written by the same script run
// as the decision (one HINCRBY, and a PEXPIRE when the day's hash is new).
// It is what an operator reads to see what a key did; it never takes part
// in a decision. Decisions made in process while Redis is down, and
// requests refused for concurrency before any script ran, are not tallied.

// tally is where one decision is counted: the day's hash and its time to
// live in milliseconds, should the decision create it.
type tally struct {
	key string
	ttl int64
}

// tallyDay is the UTC day of the last tallied decision, and when it ends.
type tallyDay struct {
	label      string
	start, end int64 // microseconds since the epoch
}

// tallyKey names identity's tally of day beside key, its sliding-window
// key: "{rl:geofence:key:demo}:tally:2026-03-29".
func tallyKey(key, day string) string { return besideKey(key, ":tally:"+day) }

// tallyFor returns where a decision on key at (microseconds; 0 for this
// process's clock) is tallied, or nil when identity is not tallied.
func (l *Limiter) tallyFor(key, identity string, at int64) *tally {
	if l.tallyDays <= 0 || (l.tallyOf != nil && !l.tallyOf(identity)) {
		return nil
	}
	if at == 0 {
		at = time.Now().UnixMicro()
	}
	d := l.today.Load()
	if d == nil || at < d.start || at >= d.end {
		start, end, label := period(Day, time.UTC, time.UnixMicro(at))
		d = &tallyDay{label: label, start: start.UnixMicro(), end: end.UnixMicro()}
		l.today.Store(d)
	}
	// Kept for tallyDays whole days after the day being tallied ends.
	ttl := (d.end-at)/1000 + int64(l.tallyDays)*24*3600*1000
	return &tally{key: tallyKey(key, d.label), ttl: ttl}
}

// DayTally is what one identity did under one policy on one UTC day.
type DayTally struct {
	Day      string // 2006-01-02
	Policy   string
	Admitted int64
	Refused  int64
	// Spent is what the admitted requests cost, in the policy's unit
	// (requests' costs, or milliseconds of database time), as settled.
	Spent int64
	Unit  Unit
}

// Tallies reads identity's tallies of the last days UTC days, today
// first, each day's policies by name; days and policies with nothing
// counted are left out. Without Redis there are none.
func (l *Limiter) Tallies(ctx context.Context, identity string, days int) ([]DayTally, error) {
	if l.redis == nil || days <= 0 {
		return nil, nil
	}
	t := l.policies()
	names := slices.Sorted(maps.Keys(t))
	var labels []string
	day := time.Now().UTC()
	for range days {
		labels = append(labels, day.Format(time.DateOnly))
		day = day.AddDate(0, 0, -1)
	}
	ctx, cancel := context.WithTimeout(ctx, 4*l.timeout)
	defer cancel()
	cmds := make([]*redis.SliceCmd, 0, len(labels)*len(names))
	_, err := l.redis.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, label := range labels {
			for _, name := range names {
				cmds = append(cmds, p.HMGet(ctx, tallyKey(t[name].key(identity), label), "a", "r", "u"))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []DayTally
	for i, c := range cmds {
		v := c.Val()
		a, r := count(v, 0), count(v, 1)
		if a == 0 && r == 0 {
			continue
		}
		out = append(out, DayTally{Day: labels[i/len(names)], Policy: names[i%len(names)], Admitted: a, Refused: r, Spent: count(v, 2), Unit: t[names[i%len(names)]].Unit()})
	}
	return out, nil
}

// count reads field i of an HMGET answer; a missing field is 0.
func count(v []any, i int) int64 {
	if i >= len(v) {
		return 0
	}
	s, _ := v[i].(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

// TallyDays is how many days a tally is kept after its day ends.
func (l *Limiter) TallyDays() int { return l.tallyDays }
