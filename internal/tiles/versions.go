package tiles

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// notifyChannel is where the tile_versions trigger announces new versions
// as "<table>:<version>".
const notifyChannel = "geogate_tiles"

//go:embed version_max.lua
var versionMaxLua string

var versionMax = redis.NewScript(versionMaxLua)

// Versions tracks the data version of each table behind a tile layer. The
// truth is the tile_versions table, bumped by triggers in the writing
// transaction; each replica keeps the versions it has seen in memory,
// learns new ones through LISTEN/NOTIFY, and publishes them to Redis,
// where every replica reads them before using a cached tile.
type Versions struct {
	db     *pgxpool.Pool
	rdb    redis.UniversalClient // nil: no Redis
	prefix string
	log    *slog.Logger
	// own is geogate's schema, quoted.
	own string
	// timeout bounds each Redis call; 0 leaves it to the client.
	timeout time.Duration

	// window is how long one read of a table's shared version vouches
	// for this replica's copies of its tiles (see current); Commit waits
	// it out after a write.
	window time.Duration
	// base is the origin of the monotonic times in checked.
	base time.Time

	mu    sync.RWMutex
	local map[string]int64
	// checked is, per table, the latest read of its shared version that
	// found it no newer than this replica's.
	checked map[string]check

	readyOnce sync.Once
	ready     chan struct{}
}

// newVersions returns Versions reading db and publishing to rdb (which may
// be nil) under keys starting with prefix, each Redis call bounded by
// timeout, with window as described at Versions.window.
func newVersions(db *pgxpool.Pool, rdb redis.UniversalClient, prefix string, timeout, window time.Duration, log *slog.Logger, own string) *Versions {
	return &Versions{db: db, rdb: rdb, prefix: prefix, timeout: timeout, window: window, log: log, base: time.Now(), own: own,
		local: map[string]int64{}, checked: map[string]check{}, ready: make(chan struct{})}
}

// check is a read of a table's shared version, sent at `sent` (monotonic,
// since Versions.base), that found it at most version.
type check struct {
	sent    time.Duration
	version int64
}

// now is the monotonic time for checks.
func (v *Versions) now() time.Duration { return time.Since(v.base) }

// confirm records that a read of table's shared version sent at sent found
// it at most version.
func (v *Versions) confirm(table string, version int64, sent time.Duration) {
	if v.window <= 0 {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c, ok := v.checked[table]; !ok || sent > c.sent {
		v.checked[table] = check{sent: sent, version: version}
	}
}

// current reports whether a tile of table at version may be served from
// this replica's memory without reading the shared version again: a read
// sent less than the window ago found it at most version. That is safe
// because every write through the API publishes its version and then
// waits the window out before it answers (Commit): a write that has
// answered published before that read was sent, so the read saw it.
func (v *Versions) current(table string, version int64) bool {
	if v.window <= 0 {
		return false
	}
	v.mu.RLock()
	c, ok := v.checked[table]
	v.mu.RUnlock()
	return ok && version >= c.version && v.now()-c.sent < v.window
}

// Ready is closed once the first LISTEN is in place and the versions have
// been read.
func (v *Versions) Ready() <-chan struct{} { return v.ready }

// Local returns the newest version of table this replica has seen.
func (v *Versions) Local(table string) int64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.local[table]
}

// raise records version of table and reports whether it was news.
func (v *Versions) raise(table string, version int64) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if version <= v.local[table] {
		return false
	}
	v.local[table] = version
	return true
}

// key is the Redis key of table's shared version. Names that Redis keys
// would carry awkwardly (spaces, the braces of a Cluster hash tag, very
// long ones) are hashed.
func (v *Versions) key(table string) string {
	if !plainName(table) {
		sum := sha256.Sum256([]byte(table))
		table = "h:" + hex.EncodeToString(sum[:12])
	}
	return v.prefix + "v:" + table
}

// plainName reports whether a schema-qualified table name is short and
// made of letters, digits, _, - and dots.
func plainName(s string) bool {
	if len(s) > 128 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.'
		if !ok {
			return false
		}
	}
	return true
}

// Observe records that table has reached version and, when that is news
// here, publishes it to Redis. Redis errors are returned but the local
// version is raised regardless.
func (v *Versions) Observe(ctx context.Context, table string, version int64) error {
	if !v.raise(table, version) || v.rdb == nil {
		return nil
	}
	return v.publish(ctx, table, version)
}

func (v *Versions) publish(ctx context.Context, table string, version int64) error {
	if v.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, v.timeout)
		defer cancel()
	}
	if err := versionMax.Run(ctx, v.rdb, []string{v.key(table)}, version).Err(); err != nil {
		return fmt.Errorf("publish tile version %s:%d: %w", table, version, err)
	}
	return nil
}

// Sync reads every version from PostgreSQL and publishes it to Redis
// (whether or not it is news here). A write path that must not leave stale
// tiles behind calls it after its transaction commits and before it
// answers: from then on every replica's next tile request uses the new
// version.
func (v *Versions) Sync(ctx context.Context) error {
	rows, err := v.db.Query(ctx, "SELECT tbl, version FROM "+v.own+".tile_versions")
	if err != nil {
		return fmt.Errorf("read tile versions: %w", err)
	}
	var table string
	var version int64
	var pub []error
	_, err = pgx.ForEachRow(rows, []any{&table, &version}, func() error {
		v.raise(table, version)
		if v.rdb != nil {
			if err := v.publish(ctx, table, version); err != nil {
				pub = append(pub, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read tile versions: %w", err)
	}
	if len(pub) > 0 {
		return pub[0]
	}
	return nil
}

// commitTimeout bounds Commit's reading and publishing of the versions.
const commitTimeout = 5 * time.Second

// Commit is Sync for a write path, then a wait of the window, so that no
// replica serves a tile of the old version from memory on the strength of
// a read sent before the new versions were published (see current). The
// write has committed whatever the client does, so both run to the end
// even if the request's context ends: its answer may still reach someone.
// A publish that fails (Redis unreachable from this replica) is returned
// for the log; until the other replicas hear of the write through NOTIFY,
// they may then serve its layer's previous tiles.
func (v *Versions) Commit(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	err := v.Sync(ctx)
	if v.window > 0 && v.rdb != nil {
		time.Sleep(v.window)
	}
	return err
}

// Run listens for version notifications until ctx ends, reconnecting after
// failures; after each (re)connection it re-reads every version, so that
// notifications missed while disconnected are made up for.
func (v *Versions) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := v.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		v.log.Warn("tile version listener stopped; reconnecting", "err", err.Error(), "in", backoff.String())
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (v *Versions) listen(ctx context.Context) error {
	pc, err := v.db.Acquire(ctx)
	if err != nil {
		return err
	}
	conn := pc.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	// Waiting for a notification runs no statement a cancel request could
	// end, so the pool's cancellation would keep this connection listening
	// for its grace period after ctx ends: close it at once instead.
	stop := context.AfterFunc(ctx, func() { _ = conn.PgConn().Conn().Close() })
	defer stop()
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	if err := v.Sync(ctx); err != nil {
		// Redis may be down; the versions read from PostgreSQL still count.
		v.log.Warn("tile versions not published", "err", err.Error())
	}
	v.readyOnce.Do(func() { close(v.ready) })
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		table, version, ok := parseNotification(n.Payload)
		if !ok {
			continue
		}
		if err := v.Observe(ctx, table, version); err != nil && ctx.Err() == nil {
			v.log.Warn("tile version not published", "err", err.Error())
		}
	}
}

func parseNotification(p string) (string, int64, bool) {
	i := strings.LastIndexByte(p, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(p[i+1:], 10, 64)
	return p[:i], n, err == nil
}
