package tiles

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisCache keeps rendered tiles in Redis, gzip-compressed, under keys that
// carry the layer's data version: a write bumps the version and so retires
// every tile rendered before it, which then ages out through the TTL.
type redisCache struct {
	rdb      redis.UniversalClient
	versions *Versions
	prefix   string
	ttl      time.Duration
	timeout  time.Duration
	// downUntil (unix nanoseconds) skips Redis for a moment after it
	// failed, so that an outage costs one timeout per second, not one per
	// request.
	downUntil atomic.Int64
	// mem holds hot tiles in process; nil when turned off.
	mem *memCache
	// fresh reads the versions of layers written behind geogate's back.
	fresh *freshVersions
}

// cooldown is how long Redis is skipped after an error.
const cooldown = time.Second

// entry is a tile as served: its ETag and gzip-compressed MVT bytes,
// nil for a tile without features.
type entry struct {
	ETag string
	Gzip []byte
}

// newRedisCache returns a redisCache in rdb under keys starting with prefix, with
// up to memBytes of hot tiles also kept in process (0: none). Each Redis
// call is bounded by timeout.
func newRedisCache(rdb redis.UniversalClient, versions *Versions, fresh *freshVersions, prefix string, ttl, timeout time.Duration, memBytes int64) *redisCache {
	return &redisCache{rdb: rdb, versions: versions, fresh: fresh, prefix: prefix, ttl: ttl, timeout: timeout, mem: newMemCache(memBytes)}
}

func (c *redisCache) key(layer string, version int64, t Tile, scopeHash string) string {
	k := c.prefix + "t:" + layer + ":" + strconv.FormatInt(version, 10) + ":" + t.String()
	if scopeHash != "" {
		k += ":s:" + scopeHash
	}
	return k
}

func (c *redisCache) available() bool { return time.Now().UnixNano() >= c.downUntil.Load() }

func (c *redisCache) failed(err error) error {
	if !errors.Is(err, context.Canceled) {
		c.downUntil.Store(time.Now().Add(cooldown).UnixNano())
	}
	return err
}

// get returns the cached tile for l, t and scopeHash at the layer's current
// version, read from Redis together with the tile in one round trip. ok is
// false on a miss; version is the version a render must reach to be
// stored. err is a Redis failure: the caller renders without the cache.
func (c *redisCache) get(ctx context.Context, l *Layer, t Tile, scopeHash string) (e entry, version int64, ok bool, err error) {
	switch {
	case l.versionKey == "":
		return c.getUntracked(ctx, l, t, scopeHash)
	case l.fresh:
		return c.getFresh(ctx, l, t, scopeHash)
	}
	table := l.versionKey
	version = c.versions.Local(table)
	if !c.available() {
		return entry{}, version, false, errors.New("tile cache: redis recently failed")
	}
	key := c.key(l.cacheName, version, t, scopeHash)
	mem, inMem := c.mem.get(key)
	if inMem && c.versions.current(table, version) {
		return mem, version, true, nil // a hot tile: no round trip at all
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if inMem {
		// The copy in memory is good while no replica has published a
		// newer version; reading that is the one round trip.
		sent := c.versions.now()
		shared, err := c.rdb.Get(ctx, c.versions.key(table)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return entry{}, version, false, c.failed(fmt.Errorf("tile cache get: %w", err))
		}
		if shared <= version {
			if shared < version {
				_ = c.versions.publish(ctx, table, version)
			}
			c.versions.confirm(table, version, sent)
			return mem, version, true, nil
		}
	}
	sent := c.versions.now()
	pipe := c.rdb.Pipeline()
	verCmd := pipe.Get(ctx, c.versions.key(table))
	tileCmd := pipe.Get(ctx, key)
	_, err = pipe.Exec(ctx)
	if err != nil && !errors.Is(err, redis.Nil) {
		return entry{}, version, false, c.failed(fmt.Errorf("tile cache get: %w", err))
	}
	shared, _ := verCmd.Int64()
	switch {
	case shared > version:
		// Another replica published a newer version than this one has
		// heard of: the tile fetched is stale, look up the current one.
		c.versions.raise(table, shared)
		c.versions.confirm(table, shared, sent)
		version = shared
		key = c.key(l.cacheName, version, t, scopeHash)
		b, err := c.rdb.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			return entry{}, version, false, nil
		}
		if err != nil {
			return entry{}, version, false, c.failed(fmt.Errorf("tile cache get: %w", err))
		}
		return c.decode(key, b, version)
	case shared < version:
		// Redis lost or never had the version (restart, eviction).
		_ = c.versions.publish(ctx, table, version)
	}
	c.versions.confirm(table, version, sent)
	b, err := tileCmd.Bytes()
	if err != nil {
		return entry{}, version, false, nil
	}
	return c.decode(key, b, version)
}

// getFresh is get for a layer whose writes geogate does not see: the tile
// is looked up at the version PostgreSQL holds now (see freshVersions).
func (c *redisCache) getFresh(ctx context.Context, l *Layer, t Tile, scopeHash string) (entry, int64, bool, error) {
	version, err := c.fresh.version(ctx, l.versionKey)
	if err != nil {
		return entry{}, c.versions.Local(l.versionKey), false, err
	}
	c.versions.raise(l.versionKey, version)
	key := c.key(l.cacheName, version, t, scopeHash)
	if e, ok := c.mem.get(key); ok {
		return e, version, true, nil
	}
	if !c.available() {
		return entry{}, version, false, errors.New("tile cache: redis recently failed")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b, err := c.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return entry{}, version, false, nil
	}
	if err != nil {
		return entry{}, version, false, c.failed(fmt.Errorf("tile cache get: %w", err))
	}
	return c.decode(key, b, version)
}

// getUntracked is get for a layer whose writes nothing reports: its
// tiles are keyed by the period of the cache TTL they were rendered in
// (see period), so none is served longer than the TTL after its render.
func (c *redisCache) getUntracked(ctx context.Context, l *Layer, t Tile, scopeHash string) (entry, int64, bool, error) {
	version := c.period(l)
	if !c.available() {
		return entry{}, version, false, errors.New("tile cache: redis recently failed")
	}
	key := c.key(l.cacheName, version, t, scopeHash)
	if e, ok := c.mem.get(key); ok {
		return e, version, true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	b, err := c.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return entry{}, version, false, nil
	}
	if err != nil {
		return entry{}, version, false, c.failed(fmt.Errorf("tile cache get: %w", err))
	}
	return c.decode(key, b, version)
}

// period numbers the TTL-long periods since the epoch, each layer's
// shifted by an offset of its own so that layers do not all expire at
// once.
func (c *redisCache) period(l *Layer) int64 {
	ttl := c.ttl.Nanoseconds()
	if ttl <= 0 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(l.cacheName))
	offset := int64(h.Sum64() % uint64(ttl))
	return (time.Now().UnixNano() + offset) / ttl
}

// decode reads a tile fetched from Redis and keeps it in memory too.
func (c *redisCache) decode(key string, b []byte, version int64) (entry, int64, bool, error) {
	e, ok := decodeEntry(b)
	if ok {
		c.mem.put(key, e)
	}
	return e, version, ok, nil
}

// lockTTL bounds how long replicas wait for one that claimed a render; a
// render that takes longer is done again by whoever asks next.
const lockTTL = 3 * time.Second

// lockPoll is how often a waiting replica looks for the tile.
const lockPoll = 15 * time.Millisecond

// claim arranges that one replica renders a missing tile while the others
// wait for it. It returns done with the tile when another replica rendered
// it meanwhile; otherwise the caller renders, and lock, when not empty, is
// the lock the caller now holds: set releases it with the tile, or unlock
// without one. When Redis fails, or the claim expires, or the other
// replica gives up, the caller renders too: the lock saves work, it is
// never needed for correctness.
func (c *redisCache) claim(ctx context.Context, l *Layer, t Tile, scopeHash string, version int64) (e entry, done bool, lock string) {
	if !c.available() {
		return entry{}, false, ""
	}
	key := c.key(l.cacheName, version, t, scopeHash)
	lock = key + ":lock"
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	got, err := c.rdb.SetNX(cctx, lock, "1", lockTTL).Result()
	cancel()
	if err != nil {
		_ = c.failed(err)
		return entry{}, false, ""
	}
	if got {
		return entry{}, false, lock
	}
	deadline := time.Now().Add(lockTTL)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return entry{}, false, ""
		case <-time.After(lockPoll):
		}
		cctx, cancel := context.WithTimeout(ctx, c.timeout)
		pipe := c.rdb.Pipeline()
		tileCmd := pipe.Get(cctx, key)
		lockCmd := pipe.Exists(cctx, lock)
		_, err := pipe.Exec(cctx)
		cancel()
		if err != nil && !errors.Is(err, redis.Nil) {
			_ = c.failed(err)
			return entry{}, false, ""
		}
		if b, err := tileCmd.Bytes(); err == nil {
			if e, ok := decodeEntry(b); ok {
				return e, true, ""
			}
		}
		if lockCmd.Val() == 0 {
			break // the other replica gave up or stored under a newer version
		}
	}
	return entry{}, false, ""
}

// unlock releases a render lock from claim that set did not. While Redis
// is failing it leaves the lock to expire.
func (c *redisCache) unlock(ctx context.Context, lock string) {
	if !c.available() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
	defer cancel()
	c.rdb.Del(ctx, lock)
}

// set compresses the rendered tile res into res.e.Gzip and stores it for
// l, t and scopeHash at res.version and, in the same round trip, raises
// the layer's shared version to at least that (a render that saw a write
// before this replica heard of it tells the others) and releases lock,
// the render lock from claim, unless it is empty. While Redis is failing
// it stores nothing and says so.
func (c *redisCache) set(ctx context.Context, l *Layer, t Tile, scopeHash string, res *result, lock string) error {
	res.e.Gzip = compress(res.raw)
	if !c.available() {
		return errors.New("tile cache: redis recently failed")
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	key := c.key(l.cacheName, res.version, t, scopeHash)
	pipe := c.rdb.Pipeline()
	if l.versionKey != "" {
		versionMax.Eval(ctx, pipe, []string{c.versions.key(l.versionKey)}, res.version)
	}
	pipe.Set(ctx, key, encodeEntry(res.e), c.ttl)
	if lock != "" {
		pipe.Del(ctx, lock)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return c.failed(fmt.Errorf("tile cache set: %w", err))
	}
	c.mem.put(key, res.e)
	return nil
}

// The stored form is the ETag, a newline, and the gzip bytes.
func encodeEntry(e entry) []byte {
	b := make([]byte, 0, len(e.ETag)+1+len(e.Gzip))
	b = append(b, e.ETag...)
	b = append(b, '\n')
	return append(b, e.Gzip...)
}

func decodeEntry(b []byte) (entry, bool) {
	i := bytes.IndexByte(b, '\n')
	if i <= 0 {
		return entry{}, false
	}
	e := entry{ETag: string(b[:i])}
	if len(b) > i+1 {
		e.Gzip = b[i+1:]
	}
	return e, true
}

// etag is a strong validator over the tile's bytes.
func etag(mvt []byte) string {
	sum := sha256.Sum256(mvt)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(io.Discard, gzip.DefaultCompression)
	return w
}}

func compress(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	var buf bytes.Buffer
	buf.Grow(len(b)/3 + 64)
	w := gzipWriters.Get().(*gzip.Writer)
	w.Reset(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	gzipWriters.Put(w)
	return buf.Bytes()
}

func decompress(b []byte) ([]byte, error) {
	if len(b) == 0 {
		return nil, nil
	}
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}
