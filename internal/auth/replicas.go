package auth

import (
	"context"
	"math"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/pg"
)

// replicaLookup looks keys up on a streaming replica, but only on one
// whose replay has passed every change to api_keys this process has heard
// of: on each change it takes the primary's WAL position before the cache
// forgets the key, and the look-ups that follow ask for a replica past it
// (else the primary). So a revoked key is never read back unrevoked from
// a replica that lags behind the revocation.
type replicaLookup struct {
	primary  *pgxpool.Pool
	replicas *pg.Replicas
	floor    atomic.Uint64
}

func newReplicaLookup(primary *pgxpool.Pool, r *pg.Replicas) *replicaLookup {
	l := &replicaLookup{primary: primary, replicas: r}
	l.floor.Store(math.MaxUint64) // nothing heard yet: the primary
	return l
}

// changed raises the floor to the primary's position now, at or past the
// commit of every change notified so far; when the primary cannot say,
// look-ups go to it until it can.
func (l *replicaLookup) changed(ctx context.Context) {
	lsn, err := l.replicas.CurrentLSN(ctx)
	if err != nil {
		lsn = math.MaxUint64
	}
	l.floor.Store(lsn)
}

func (l *replicaLookup) ByHash(ctx context.Context, h [32]byte) (Key, error) {
	var k Key
	err := l.replicas.Read(pg.WithMinLSN(ctx, l.floor.Load()), l.primary, func(pool *pgxpool.Pool) (err error) {
		k, err = NewStore(pool).ByHash(ctx, h)
		return err
	})
	return k, err
}
