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
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/pg"
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

// Reads returns ctx for a request whose reads may go to a replica: the
// first of them looks its caller's floor up (pg.WithMinLSNFunc). On nil
// Floors (no replicas), ctx itself.
func (f *Floors) Reads(ctx context.Context) context.Context {
	if f == nil {
		return ctx
	}
	return pg.WithMinLSNFunc(ctx, func() uint64 { return f.Of(ctx, auth.FromContext(ctx).LimitKey()) })
}

// Wrote makes the primary's position now (r.CurrentLSN) the read floor
// of the caller of ctx, after its write committed: its later reads,
// through any replica of geogate, go only where the write has been
// replayed. A floor that cannot be raised is logged, not returned: the
// write has been answered. On nil Floors it does nothing.
func (f *Floors) Wrote(ctx context.Context, r *pg.Replicas, log *slog.Logger) {
	if f == nil {
		return
	}
	lsn, err := r.CurrentLSN(ctx)
	if err == nil {
		err = f.Raise(ctx, auth.FromContext(ctx).LimitKey(), lsn)
	}
	if err != nil {
		log.Warn("read floor not raised after a write; the writer's next reads may miss it for up to DB_REPLICA_MAX_LAG", "err", err.Error())
	}
}
