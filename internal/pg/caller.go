package pg

import (
	"context"
	"errors"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/geogate/geogate/internal/apperr"
)

// Conn is what a Runner hands the function it runs: a pooled connection
// (*pgxpool.Conn is one), or, for a request that runs as its caller, the
// same connection sending every statement after the caller's role and
// claims.
type Conn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Caller is who a statement runs as in PostgreSQL: a role the login role
// may SET ROLE to, and what the row-level security policies may read of
// the caller. Every value comes from what geogate verified (a key's
// stored settings, a signed token's claims), never from a header.
type Caller struct {
	// Role is the role the statements run as.
	Role string
	// Claims is a JSON object, request.jwt.claims to the policies.
	Claims string
	// Key is the API key id, "" for a token (request.geogate.key).
	Key string
	// Identity is the caller's limit identity, key:<id> or sub:<subject>
	// (request.geogate.identity).
	Identity string
}

// callerSQL sets the caller for the rest of the transaction it runs in:
// set_config's third argument makes each setting local to it, so the
// connection goes back to the pool as the login role.
// It answers one row of one constant column, not the values set (the
// caller's own): a statement of no columns would have pgx ask the server
// to describe its result again on every batch.
const callerSQL = `SELECT 1 FROM (VALUES (set_config('role', $1, true), set_config('request.jwt.claims', $2, true),
       set_config('request.geogate.key', $3, true), set_config('request.geogate.identity', $4, true))) v`

func (c *Caller) args() []any { return []any{c.Role, c.Claims, c.Key, c.Identity} }

// callerSlot is where a request's caller is put once the gate has
// admitted it to a layer that runs as its caller. It is made before the
// request is handled and filled later, so that every context derived
// from the request's sees it.
type callerSlot struct {
	mu sync.Mutex
	c  *Caller
}

type slotKey struct{}

// WithCallerSlot returns ctx with room for a caller (see SetCaller).
func WithCallerSlot(ctx context.Context) context.Context {
	return context.WithValue(ctx, slotKey{}, &callerSlot{})
}

// WithoutCaller returns ctx with a slot of its own, empty: statements run
// for it run as the login role, whatever caller ctx had. Code that keeps
// geogate's own tables for a request that runs as its caller uses it, and
// queues the caller's statements between QueueAs and QueueAsLogin.
func WithoutCaller(ctx context.Context) context.Context { return WithCallerSlot(ctx) }

// QueueAs queues, in b, setting c as the caller for the statements
// queued after it in b's transaction, up to QueueAsLogin.
func QueueAs(b *pgx.Batch, c *Caller) { b.Queue(callerSQL, c.args()...) }

// asLoginSQL ends what callerSQL began, within the transaction: the role
// back to the login role and the caller's settings emptied.
const asLoginSQL = `SELECT 1 FROM (VALUES (set_config('role', 'none', true), set_config('request.jwt.claims', '', true),
       set_config('request.geogate.key', '', true), set_config('request.geogate.identity', '', true))) v`

// QueueAsLogin queues, in b, running the statements after it as the
// login role again.
func QueueAsLogin(b *pgx.Batch) { b.Queue(asLoginSQL) }

// ErrNoCallerSlot is SetCaller's answer for a context made without
// WithCallerSlot: a request that cannot run as its caller must not run.
var ErrNoCallerSlot = errors.New("pg: the request has no room for a caller")

// SetCaller makes every statement run for ctx from now on (through a
// Runner) run as c. A context without a slot is refused.
func SetCaller(ctx context.Context, c Caller) error {
	s, _ := ctx.Value(slotKey{}).(*callerSlot)
	if s == nil {
		return ErrNoCallerSlot
	}
	s.mu.Lock()
	s.c = &c
	s.mu.Unlock()
	return nil
}

// CallerOf is the caller the statements of ctx run as, nil for the login
// role.
func CallerOf(ctx context.Context) *Caller {
	s, _ := ctx.Value(slotKey{}).(*callerSlot)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c
}

// asCaller is a connection that runs each statement as a caller. Each is
// sent in one batch after the caller's settings: the batch is one
// implicit transaction and one round trip, so the settings hold for
// that statement alone and cost no extra wait.
type asCaller struct {
	conn   Conn
	caller *Caller
}

// ConnFor is conn as the caller of ctx (see SetCaller), or conn itself.
// A Runner hands its functions such a connection; code that acquires
// its own connections for a request uses it so.
func ConnFor(ctx context.Context, conn Conn) Conn {
	if c := CallerOf(ctx); c != nil {
		return &asCaller{conn: conn, caller: c}
	}
	return conn
}

// ErrCallerRole refuses a request whose caller's role the database would
// not switch to (the login role is no longer a member of it, or it is
// gone). It names no role.
var ErrCallerRole = apperr.New(apperr.Forbidden, "This layer answers only callers with a database role this service accepts; ask the operator for a key or token that has one.")

// callerFailed is what a failure to set the caller means: the role
// refused is ErrCallerRole, anything else (a lost connection) stays.
func callerFailed(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && (pe.Code == "42501" || pe.Code == "22023") {
		return apperr.Wrap(apperr.Forbidden, apperr.MessageOf(ErrCallerRole), err)
	}
	return err
}

// CallerRefused is err as a caller is told of it when statements run as
// a caller without a Runner's help (queued with QueueAs): a role the
// database would not switch to, or a privilege it lacks, is the 403 of
// ErrCallerRole; anything else stays.
func CallerRefused(err error) error { return callerFailed(err) }

// refusedCaller reports a statement a caller's role may not run: no
// privilege on a table, or a row its policies' WITH CHECK refuse.
func refusedCaller(ctx context.Context, err error) bool {
	var pe *pgconn.PgError
	return CallerOf(ctx) != nil && errors.As(err, &pe) && pe.Code == "42501"
}

func (a *asCaller) batch(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(callerSQL, a.caller.args()...)
	b.Queue(sql, args...)
	return b
}

func (a *asCaller) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	br := a.conn.SendBatch(ctx, a.batch(sql, args))
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return pgconn.CommandTag{}, callerFailed(err)
	}
	tag, err := br.Exec()
	return tag, errors.Join(err, br.Close())
}

func (a *asCaller) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	br := a.conn.SendBatch(ctx, a.batch(sql, args))
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, callerFailed(err)
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

func (a *asCaller) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := a.Query(ctx, sql, args...)
	return &oneRow{rows: rows, err: err}
}

// SendBatch sends b after the caller's settings, in the same round trip;
// the results are b's.
func (a *asCaller) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	nb := &pgx.Batch{}
	nb.Queue(callerSQL, a.caller.args()...)
	nb.QueuedQueries = append(nb.QueuedQueries, b.QueuedQueries...)
	br := a.conn.SendBatch(ctx, nb)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return failedBatch{callerFailed(err)}
	}
	return br
}

// Begin starts a transaction and sets the caller in it: one round trip
// more than a plain Begin, for the writes that need a transaction of
// their own.
func (a *asCaller) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := a.conn.Begin(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := tx.Exec(ctx, callerSQL, a.caller.args()...); err != nil {
		_ = tx.Rollback(ctx)
		return nil, callerFailed(err)
	}
	return tx, nil
}

// batchRows are a statement's rows read from a batch: closing them
// closes the batch, and an error the batch ends with is theirs.
type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// oneRow is QueryRow's answer from Query's, as pgx's own is.
type oneRow struct {
	rows pgx.Rows
	err  error
}

func (r *oneRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch answers every result of a batch whose caller settings
// failed with that failure.
type failedBatch struct{ err error }

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return &oneRow{err: f.err} }
func (f failedBatch) Close() error                     { return f.err }
func (f failedBatch) Tx() pgx.Tx                       { return nil }
