package pg

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/geogate/geogate/internal/apperr"
)

// Timeouts bound every database call of a Runner.
type Timeouts struct {
	// QueryTimeout bounds one call, waiting for a connection included.
	QueryTimeout time.Duration
	// AcquireTimeout bounds the wait for a free pool connection.
	AcquireTimeout time.Duration
}

// Runner runs a request's queries under Timeouts and turns driver errors
// into apperr kinds, so that every capability answers a busy, slow, lost
// or changed database the same way.
type Runner struct {
	Pool *pgxpool.Pool
	// Replicas, when set, serve the reads made through Read.
	Replicas *Replicas
	Timeouts Timeouts
	// Stale, when set, runs when a query finds a layer other than the
	// catalog said (see the function Stale).
	Stale func()
	// Queue, when set, is entered before a connection is acquired, so
	// that callers get to a busy database in its order rather than the
	// pool's first come, first served.
	Queue Queue
}

// Queue orders callers' access to the database when it is busy
// (fairshare.Queue is one).
type Queue interface {
	// Enter waits for a slot for the caller of ctx. leave gives the slot
	// back, told how long the caller held a connection with it. The error
	// is an apperr when the caller is turned away, or ctx's.
	Enter(ctx context.Context) (leave func(held time.Duration), err error)
}

// Enter enters q for the caller of ctx; a nil q lets everyone in at once.
func Enter(ctx context.Context, q Queue) (leave func(time.Duration), err error) {
	if q == nil {
		return noLeave, nil
	}
	return q.Enter(ctx)
}

func noLeave(time.Duration) {}

// ErrLayerChanged answers a query whose layer was dropped or altered under
// it.
var ErrLayerChanged = apperr.New(apperr.NotFound, "This layer was removed or changed while it was being read; GET /layers lists the layers as they are now.")

// Do runs fn on a pooled connection. The wait for a connection is bounded
// by AcquireTimeout (then apperr.Unavailable) and the whole call by
// QueryTimeout (then apperr.Timeout), the wait in Queue included. When ctx
// ends first (the client went away) or the deadline passes, the pool's
// connections cancel the running statement inside PostgreSQL (see Open).
// The time the connection was held is added to the Meter of ctx.
func (r *Runner) Do(ctx context.Context, fn func(ctx context.Context, conn Conn) error) error {
	qctx, cancel := context.WithTimeout(ctx, r.Timeouts.QueryTimeout)
	defer cancel()
	leave, err := Enter(qctx, r.Queue)
	if err != nil {
		return r.classify(ctx, err)
	}
	var held time.Duration
	// Deferred before the release, so run after it: the slot is given
	// back once the connection is back in the pool.
	defer func() { leave(held) }()
	conn, err := r.acquire(qctx)
	if err != nil {
		return r.classify(ctx, err)
	}
	defer conn.Release()
	held, err = Held(qctx, func() error { return fn(qctx, ConnFor(qctx, conn)) })
	if err != nil {
		return r.classify(ctx, err)
	}
	return nil
}

// Read is Do for a read that may run on a replica: one Replicas picks for
// ctx (see WithMinLSN), else the primary. When the replica proves
// unreachable before the read reached it (no connection, or a statement
// not sent), it is marked so and the read runs on the primary instead; a
// replica lost while it runs the read fails that read, as the primary
// would.
func (r *Runner) Read(ctx context.Context, fn func(ctx context.Context, conn Conn) error) error {
	if r.Replicas == nil {
		return r.Do(ctx, fn)
	}
	qctx, cancel := context.WithTimeout(ctx, r.Timeouts.QueryTimeout)
	defer cancel()
	leave, err := Enter(qctx, r.Queue)
	if err != nil {
		return r.classify(ctx, err)
	}
	var held time.Duration
	defer func() { leave(held) }()
	err = r.Replicas.Read(qctx, r.Pool, func(pool *pgxpool.Pool) error {
		conn, err := r.acquireFrom(qctx, pool)
		if err != nil {
			return err
		}
		defer conn.Release()
		d, err := Held(qctx, func() error { return fn(qctx, ConnFor(qctx, conn)) })
		held += d
		return err
	})
	if err != nil {
		return r.classify(ctx, err)
	}
	return nil
}

// PoolPolicy names, in a refusal's violated-policies, a pool that had no
// connection free within DB_ACQUIRE_TIMEOUT.
const PoolPolicy = "database-connections"

func (r *Runner) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	return r.acquireFrom(ctx, r.Pool)
}

func (r *Runner) acquireFrom(ctx context.Context, pool *pgxpool.Pool) (*pgxpool.Conn, error) {
	if r.Queue != nil {
		// The call holds a slot of the fair queue, which admits no more
		// calls than the serving pool has connections, and nothing else
		// takes them (background work has a pool of its own): one comes
		// free, or is being made, for this call. Its wait is the call's,
		// bounded by the query deadline; DB_ACQUIRE_TIMEOUT would turn a
		// caller away while a cold pool opens its connections.
		return pool.Acquire(ctx)
	}
	actx, cancel := context.WithTimeout(ctx, r.Timeouts.AcquireTimeout)
	defer cancel()
	conn, err := pool.Acquire(actx)
	if err != nil && actx.Err() != nil && ctx.Err() == nil && !IsConnectErr(err) {
		// No connection came free in time: the database is at capacity,
		// which a client is told as the fair queue tells it, with a time
		// to come back.
		return nil, &apperr.Error{Kind: apperr.Reduced, Message: "The database is busy; try again shortly.",
			Limits: []string{PoolPolicy}, RetryAfter: time.Second, Err: err}
	}
	return conn, err
}

// classify turns a driver error into the error vocabulary; the driver's
// text only ever reaches logs. The error decides, not the clock: a
// statement that failed for its own reason (bad data, bad arguments) is
// that failure even when the deadline passed meanwhile, and only a
// cancellation is a timeout, or the client's going away when ctx ended.
func (r *Runner) classify(ctx context.Context, err error) error {
	var ae *apperr.Error
	switch {
	case errors.As(err, &ae):
		return err
	case IsCancellation(err) && ctx.Err() != nil:
		return ctx.Err() // the client went away, or its own deadline passed
	case IsCancellation(err):
		return apperr.Wrap(apperr.Timeout, "The query took longer than "+r.Timeouts.QueryTimeout.String()+" and was cancelled.", err)
	case IsConnectErr(err):
		return apperr.Wrap(apperr.Unavailable, "The database is unavailable; try again shortly.", err)
	case refusedCaller(ctx, err):
		return apperr.Wrap(apperr.Forbidden, "The database's rules for your role refuse this request.", err)
	case Stale(err):
		if r.Stale != nil {
			r.Stale()
		}
		return apperr.Wrap(apperr.NotFound, apperr.MessageOf(ErrLayerChanged), err)
	}
	return err
}

// IsCancellation reports an error that says a call was cut short rather
// than failed: its context ended (waiting for a slot or a connection, or
// reading the answer), the server cancelled the statement (a cancel
// request or statement_timeout, SQLSTATE 57014), or the connection timed
// out after the cancel went unanswered.
func IsCancellation(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		isQueryCanceled(err) || pgconn.Timeout(err)
}

// isQueryCanceled reports a statement cancelled by a cancel request or a
// statement_timeout (SQLSTATE 57014).
func isQueryCanceled(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// IsConnectErr reports errors that mean the server cannot be reached or
// went away: connection failures, broken connections and the SQLSTATEs of
// a server shutting down or starting up. A pool closed by a graceful
// shutdown (puddle.ErrClosedPool, which pgxpool returns unwrapped) is one
// too: this replica can no longer reach the database, another can.
func IsConnectErr(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false // these satisfy net.Error too
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.As(err, &pe):
		return pe.Code[:2] == "08" || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) || errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Deadlocked reports a transaction that PostgreSQL rolled back to break
// a deadlock (SQLSTATE 40P01): run again, it normally succeeds.
func Deadlocked(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "40P01"
}

// Stale reports whether a query's error says it named a relation, column
// or type that is not, or no longer, what the catalog said: the table was
// dropped, altered or retyped after the layers were read. Read the catalog
// again and answer as for a layer that changed.
func Stale(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "42P01", "42703", "42883", "42804", "0A000":
		// undefined_table, undefined_column, undefined_function,
		// datatype_mismatch, feature_not_supported (a column retyped
		// under a prepared statement: "cached plan must not change
		// result type").
		return true
	}
	return false
}
