package tiles

import "context"

// tileCache is where the Service keeps the tiles it rendered and looks
// for them before it renders: redisCache (Redis, with hot tiles in
// memory), or noCache when the cache is off.
type tileCache interface {
	// get returns the cached tile of l, t and scopeHash at the layer's
	// current version; ok false is a miss. version is the version a
	// render must reach to be kept. err is a failure of the cache, which
	// counts as a miss: the tile is rendered.
	get(ctx context.Context, l *Layer, t Tile, scopeHash string) (e entry, version int64, ok bool, err error)
	// claim arranges that one replica renders a missing tile while the
	// others wait for it: done with the tile when another rendered it
	// meanwhile, else the caller renders, holding lock when not empty.
	claim(ctx context.Context, l *Layer, t Tile, scopeHash string, version int64) (e entry, done bool, lock string)
	// unlock releases a lock from claim that set did not.
	unlock(ctx context.Context, lock string)
	// set keeps a rendered tile at its version and releases lock with
	// it. A cache that keeps tiles compressed leaves the gzip bytes in
	// res, to be sent as they are to clients that take them.
	set(ctx context.Context, l *Layer, t Tile, scopeHash string, res *result, lock string) error
}

// noCache keeps no tile: every tile is rendered, at the layer's version
// as this process knows it.
type noCache struct{ versions *Versions }

func (n noCache) get(_ context.Context, l *Layer, _ Tile, _ string) (entry, int64, bool, error) {
	return entry{}, n.versions.Local(l.versionKey), false, nil
}

func (noCache) claim(context.Context, *Layer, Tile, string, int64) (entry, bool, string) {
	return entry{}, false, ""
}

func (noCache) unlock(context.Context, string) {}

// set keeps nothing, and compresses nothing: a tile is compressed only
// for a client that takes gzip.
func (noCache) set(context.Context, *Layer, Tile, string, *result, string) error { return nil }
