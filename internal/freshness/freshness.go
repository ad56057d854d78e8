// Package freshness keeps reads from replicas no older than their caller's
// own writes. After a write it remembers, per identity and in Redis (so
// every geogate replica knows), the primary's WAL position at the commit;
// a later read by that identity asks for a database server whose replay
// has passed it (pg.WithMinLSN). The floor lives a little longer than the
// replicas' lag bound: by then every replica that gets reads holds the
// write anyway.
package freshness

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Floors stores each identity's read floor.
type Floors struct {
	rdb   redis.UniversalClient
	ttl   time.Duration
	raise *redis.Script
}

// raiseLua sets KEYS[1] to ARGV[1] unless it holds a later position, and
// keeps it ARGV[2] milliseconds. Positions are zero-padded to 20 digits, so
// that comparing them as strings compares them as numbers, exactly.
const raiseLua = `
local cur = redis.call('GET', KEYS[1])
if not cur or ARGV[1] > cur then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1`

// New returns Floors on rdb kept for ttl after each write.
func New(rdb redis.UniversalClient, ttl time.Duration) *Floors {
	return &Floors{rdb: rdb, ttl: ttl, raise: redis.NewScript(raiseLua)}
}

func key(identity string) string { return "rw:" + identity }

// Raise makes lsn the identity's floor, unless it has a later one.
func (f *Floors) Raise(ctx context.Context, identity string, lsn uint64) error {
	return f.raise.Run(ctx, f.rdb, []string{key(identity)}, fmt.Sprintf("%020d", lsn), f.ttl.Milliseconds()).Err()
}

// Of returns the identity's floor, 0 when it has none. When Redis cannot
// say, it returns math.MaxUint64, which only the primary satisfies: a
// read never risks missing its caller's write.
func (f *Floors) Of(ctx context.Context, identity string) uint64 {
	s, err := f.rdb.Get(ctx, key(identity)).Result()
	switch {
	case err == redis.Nil:
		return 0
	case err != nil:
		return math.MaxUint64
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return n
}
