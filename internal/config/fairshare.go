package config

import (
	"slices"
	"strconv"
	"strings"

	"github.com/geogate/geogate/internal/fairshare"
)

// FairShare holds the settings of the queue in front of database calls.
type FairShare struct {
	// On builds the queue; off, calls take pool connections first come,
	// first served.
	On       bool
	Settings fairshare.Settings
}

// loadFairShare reads the fair queue's settings. Its slots default to
// the serving pool's size and its longest wait to DB_ACQUIRE_TIMEOUT,
// which it takes the place of for a caller that finds the database busy,
// or half DB_QUERY_TIMEOUT if that is less: the query deadline bounds the
// wait too, and a wait it ended would be a 504, not a 503.
func loadFairShare(r *reader, db DB) FairShare {
	f := FairShare{
		On: r.boolean("DB_FAIR_SHARE", true),
		Settings: fairshare.Settings{
			Slots:    r.integer("DB_FAIR_SLOTS", db.MaxConns, 1, 1000),
			MaxWait:  r.duration("DB_FAIR_MAX_WAIT", min(db.AcquireTimeout, db.QueryTimeout/2)),
			HalfLife: r.duration("DB_FAIR_HALF_LIFE", fairshare.DefaultHalfLife),
			Weights:  tierWeights(r, "TIER_WEIGHTS"),
			Group: fairshare.Grouping{
				By:       r.str("DB_FAIR_IDENTITY", fairshare.ByAccount),
				IPv4Bits: r.integer("DB_FAIR_IPV4_PREFIX", 24, 8, 32),
				IPv6Bits: r.integer("DB_FAIR_IPV6_PREFIX", 48, 16, 128),
			},
		},
	}
	if !slices.Contains(fairshare.Groupings, f.Settings.Group.By) {
		r.fail("DB_FAIR_IDENTITY", f.Settings.Group.By, "must be one of "+strings.Join(fairshare.Groupings, ", "))
	}
	f.Settings.Adaptive = r.boolean("DB_FAIR_ADAPTIVE", true)
	f.Settings.MinSlots = r.integer("DB_FAIR_MIN_SLOTS", min(fairshare.DefaultMinSlots, f.Settings.Slots), 1, f.Settings.Slots)
	f.Settings.Tolerance = r.number("DB_FAIR_LATENCY_TOLERANCE", fairshare.DefaultTolerance, 1.05, 100)
	f.Settings.MaxQueue = r.integer("DB_FAIR_MAX_QUEUE", 64*f.Settings.Slots, 1, 1_000_000)
	if r.str("DB_FAIR_MAX_WAIT", "") != "" && f.Settings.MaxWait >= db.QueryTimeout {
		r.fail("DB_FAIR_MAX_WAIT", f.Settings.MaxWait.String(), "must be less than DB_QUERY_TIMEOUT ("+db.QueryTimeout.String()+"), which bounds the wait and the query together")
	}
	return f
}

// tierWeights reads tier=weight pairs separated by commas: gold=4,silver=2.
func tierWeights(r *reader, name string) map[string]int {
	v := r.str(name, "")
	if v == "" {
		return nil
	}
	out := map[string]int{}
	for _, pair := range strings.Split(v, ",") {
		tier, w, ok := strings.Cut(strings.TrimSpace(pair), "=")
		tier = strings.TrimSpace(tier)
		n, err := strconv.Atoi(strings.TrimSpace(w))
		switch {
		case !ok || tier == "":
			r.fail(name, v, "not a list of tier=weight, for example gold=4,silver=2")
			return nil
		case err != nil || n < 1 || n > 1000:
			r.fail(name, v, "the weight of "+tier+" must be a whole number from 1 to 1000")
			return nil
		case out[tier] != 0:
			r.fail(name, v, "names "+tier+" twice")
			return nil
		}
		out[tier] = n
	}
	return out
}
