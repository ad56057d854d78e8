package geofence

import (
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/catalog"
)

// Timeouts bound every database call of the package.
type Timeouts struct {
	// QueryTimeout bounds one call, waiting for a connection included.
	QueryTimeout time.Duration
	// AcquireTimeout bounds the wait for a free pool connection.
	AcquireTimeout time.Duration
}

// db runs queries under Timeouts. It is the only code that touches the pool.
type db struct {
	pool     *pgxpool.Pool
	timeouts Timeouts
	// stale, when set, runs when a query finds a layer other than the
	// catalog said (see catalog.Stale).
	stale func()
}

// errLayerChanged answers a query whose layer was dropped or altered under
// it.
var errLayerChanged = apperr.New(apperr.NotFound, "This layer was removed or changed while it was being read; GET /layers lists the layers as they are now.")

// do runs fn on a pooled connection. The wait for a connection is bounded
// by AcquireTimeout (then apperr.Unavailable) and the whole call by
// QueryTimeout (then apperr.Timeout). When ctx ends first (the client went
// away) or the deadline passes, the pool's connections cancel the running
// statement inside PostgreSQL (see pg.Open).
func (d *db) do(ctx context.Context, fn func(ctx context.Context, conn *pgxpool.Conn) error) error {
	qctx, cancel := context.WithTimeout(ctx, d.timeouts.QueryTimeout)
	defer cancel()
	conn, err := d.acquire(qctx)
	if err != nil {
		return d.classify(ctx, qctx, err)
	}
	defer conn.Release()
	if err := fn(qctx, conn); err != nil {
		return d.classify(ctx, qctx, err)
	}
	return nil
}

func (d *db) acquire(ctx context.Context) (*pgxpool.Conn, error) {
	actx, cancel := context.WithTimeout(ctx, d.timeouts.AcquireTimeout)
	defer cancel()
	conn, err := d.pool.Acquire(actx)
	if err != nil && actx.Err() != nil && ctx.Err() == nil && !isConnectErr(err) {
		return nil, apperr.Wrap(apperr.Unavailable, "The database is busy; try again shortly.", err)
	}
	return conn, err
}

// classify turns a driver error into the package's error vocabulary; the
// driver's text only ever reaches logs.
func (d *db) classify(ctx, qctx context.Context, err error) error {
	var ae *apperr.Error
	switch {
	case errors.As(err, &ae):
		return err
	case ctx.Err() != nil:
		return ctx.Err() // the client went away, or its own deadline passed
	case qctx.Err() != nil || isQueryCanceled(err) || pgconn.Timeout(err):
		return apperr.Wrap(apperr.Timeout, "The query took longer than "+d.timeouts.QueryTimeout.String()+" and was cancelled.", err)
	case isConnectErr(err):
		return apperr.Wrap(apperr.Unavailable, "The database is unavailable; try again shortly.", err)
	case catalog.Stale(err):
		if d.stale != nil {
			d.stale()
		}
		return apperr.Wrap(apperr.NotFound, apperr.MessageOf(errLayerChanged), err)
	}
	return err
}

// isQueryCanceled reports a statement cancelled by a cancel request or a
// statement_timeout (SQLSTATE 57014).
func isQueryCanceled(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57014"
}

// isConnectErr reports errors that mean the server cannot be reached or
// went away: connection failures, broken connections and the SQLSTATEs of
// a server shutting down or starting up.
func isConnectErr(err error) bool {
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
	return pgconn.SafeToRetry(err) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}
