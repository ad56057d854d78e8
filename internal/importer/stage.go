package importer

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// A staged import fills a layer that is replaced or empty in three steps:
//
//  1. One transaction creates a staging table like the layer, without its
//     indexes, and copies the rows into it (COPY FREEZE). Nobody reads it.
//  2. The layer's indexes are built on the staging table on two
//     connections at once, the costliest first (a GiST index whose
//     operator classes cannot sort, such as PostGIS 3.3's geography, is
//     built by inserting every row). In a single transaction they would be
//     built one after the other.
//  3. One short transaction locks the layer, drops it, renames the staging
//     table, its indexes and its id sequence to the layer's names and
//     recreates the layer's triggers. Readers wait for that lock only, and
//     see the old rows or the new ones.
//
// Any failure drops the staging table; one left by a crash is dropped by
// the next import of the layer. Only layers whose definition the swap can
// carry over take this path (see stageableSQL): others, such as geofences
// with their row triggers keeping geofence_parts, load in place.

// stagingTable names the staging table of a layer.
func stagingTable(l Layer) string { return string(l) + "_import_staging" }

// buildMemory is maintenance_work_mem for each index build; the builds run
// at the same time.
const buildMemory = "128MB"

// lockLayer takes a session advisory lock that lets one import of the
// layer run at a time, across the transactions of a staged import. The
// returned func releases it; if that fails the connection is closed, which
// releases it too.
func lockLayer(ctx context.Context, conn *pgx.Conn, l Layer) (unlock func(), err error) {
	key := "geogate import " + string(l)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", key); err != nil {
		return nil, fmt.Errorf("lock %s: %w", l, err)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", key); err != nil {
			conn.Close(ctx) //nolint:errcheck // the pool discards a closed connection
		}
	}, nil
}

// stageableSQL reports whether a swap keeps everything that defines the
// layer $1: a plain table owned by the current user, without grants,
// storage options, row security, rules, inheritance, publications or
// foreign keys; its triggers enabled, statement-level and without
// transition tables (a row trigger must see each row: it runs in place),
// besides those of its deferrable keys;
// nothing else depending on it (a view, a function body); an id sequence.
const stageableSQL = `
SELECT c.relkind = 'r' AND NOT c.relrowsecurity AND c.relacl IS NULL AND c.reloptions IS NULL
  AND c.reltablespace = 0 AND c.relreplident = 'd'
  AND c.relowner = (SELECT oid FROM pg_roles WHERE rolname = current_user)
  AND NOT EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid
    AND (t.tgisinternal OR t.tgenabled <> 'O' OR t.tgtype & 1 = 1
         OR t.tgoldtable IS NOT NULL OR t.tgnewtable IS NOT NULL)
    -- a deferrable key's own trigger comes back with the key
    AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.oid = t.tgconstraint AND k.conrelid = c.oid
                    AND k.contype IN ('p', 'u') AND t.tgisinternal))
  AND NOT EXISTS (SELECT 1 FROM pg_constraint f
    WHERE f.confrelid = c.oid OR (f.conrelid = c.oid AND f.contype NOT IN ('p', 'u', 'c', 'n')))
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
    WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = c.oid
      AND d.classid NOT IN ('pg_class'::regclass, 'pg_constraint'::regclass, 'pg_trigger'::regclass,
                            'pg_attrdef'::regclass, 'pg_type'::regclass, 'pg_statistic_ext'::regclass))
  AND NOT EXISTS (SELECT 1 FROM pg_depend d
    WHERE d.refclassid = 'pg_type'::regclass AND d.refobjid = c.reltype AND d.classid <> 'pg_type'::regclass)
  AND NOT EXISTS (SELECT 1 FROM pg_rewrite r WHERE r.ev_class = c.oid)
  AND NOT EXISTS (SELECT 1 FROM pg_inherits i WHERE i.inhrelid = c.oid OR i.inhparent = c.oid)
  AND NOT EXISTS (SELECT 1 FROM pg_publication_rel p WHERE p.prrelid = c.oid)
  AND pg_get_serial_sequence($1, 'id') IS NOT NULL
FROM pg_class c WHERE c.oid = $1::regclass`

// canStage drops a staging table left by a crashed import (the caller
// holds the layer's import lock) and reports whether this import is
// staged: the layer is replaced, or is empty, and stageableSQL allows it.
func canStage(ctx context.Context, conn *pgx.Conn, o Options) (bool, error) {
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+o.qualified(stagingTable(o.Layer))); err != nil {
		return false, fmt.Errorf("drop staging table: %w", err)
	}
	var ok bool
	if err := conn.QueryRow(ctx, stageableSQL, o.qualified(string(o.Layer))).Scan(&ok); err != nil {
		return false, fmt.Errorf("database: %w", err)
	}
	if !ok || o.Replace {
		return ok, nil
	}
	// Rows may arrive before the swap: it looks again under its lock.
	var empty bool
	table := o.qualified(string(o.Layer))
	if err := conn.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM "+table+")").Scan(&empty); err != nil {
		return false, fmt.Errorf("database: %w", err)
	}
	return empty, nil
}

// stager carries a staged import from the staging table to the swap.
type stager struct {
	conn    *pgx.Conn
	cfg     *pgx.ConnConfig // for the connections of the index builds
	layer   Layer
	schema  string   // the layer's schema, quoted
	table   string   // the layer, quoted with its schema
	staging string   // the staging table, quoted with its schema
	builds  []string // statements building the layer's indexes on the staging table
	renames []string // statements giving them the layer's names after the swap
}

// importStaged loads the rows through a staging table (see above); cfg
// opens the connections of the index builds.
func importStaged(ctx context.Context, conn *pgx.Conn, cfg *pgx.ConnConfig, r io.Reader, o Options) (res Result, err error) {
	s := &stager{
		conn:    conn,
		cfg:     cfg,
		layer:   o.Layer,
		schema:  pgx.Identifier{o.schema()}.Sanitize(),
		table:   o.qualified(string(o.Layer)),
		staging: o.qualified(stagingTable(o.Layer)),
	}
	swapped := false
	defer func() {
		if !swapped {
			s.drop(ctx)
		}
	}()
	ready := s.dial(ctx, buildConns)
	defer func() {
		for _, c := range ready() {
			if c != nil {
				c.Close(context.WithoutCancel(ctx)) //nolint:errcheck // nothing left to do on it
			}
		}
	}()
	res, err = s.load(ctx, r, o)
	if err != nil {
		return res, err
	}
	if err := s.build(ctx, ready()); err != nil {
		res.Rows = 0
		return res, err
	}
	notEmpty, err := s.swap(ctx, o)
	if err != nil {
		res.Rows = 0
		return res, err
	}
	if notEmpty {
		return Result{NotEmpty: true}, nil
	}
	swapped = true
	return res, nil
}

// load creates the staging table and copies the rows into it, in one
// transaction.
func (s *stager) load(ctx context.Context, r io.Reader, o Options) (Result, error) {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("database: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
		return Result{}, fmt.Errorf("database: %w", err)
	}
	if _, err := tx.Exec(ctx, "CREATE TABLE "+s.staging+" (LIKE "+s.table+" INCLUDING ALL EXCLUDING INDEXES)"); err != nil {
		return Result{}, fmt.Errorf("create staging table: %w", err)
	}
	if err := s.plan(ctx, tx); err != nil {
		return Result{}, err
	}
	l := &loader{tx: tx, layer: o.Layer, layerTable: s.table, table: s.staging}
	res, err := l.load(ctx, r, o, true)
	if err != nil {
		return res, err
	}
	if err := tx.Commit(ctx); err != nil {
		res.Rows = 0
		return res, fmt.Errorf("commit: %w", err)
	}
	return res, nil
}

// stagedIndexesSQL lists the layer's indexes, the costliest to build
// first: kind ('c' for one backing a primary key or unique constraint, 'i'
// for another), name (the constraint's for 'c'), the index's definition,
// and for 'c' how the constraint is added on the built index ('%s' stands
// for its name). A GiST index whose operator classes cannot sort (PostGIS
// 3.3's geography) is built by inserting every row, several times slower
// than a sorted build.
const stagedIndexesSQL = `
SELECT CASE WHEN c.oid IS NULL THEN 'i' ELSE 'c' END, coalesce(c.conname, ic.relname)::text,
  pg_get_indexdef(i.indexrelid),
  coalesce(CASE c.contype WHEN 'p' THEN 'PRIMARY KEY' WHEN 'u' THEN 'UNIQUE' END || ' USING INDEX %s'
    || CASE WHEN c.condeferrable THEN ' DEFERRABLE' ELSE '' END
    || CASE WHEN c.condeferred THEN ' INITIALLY DEFERRED' ELSE '' END, '')
FROM pg_index i
JOIN pg_class ic ON ic.oid = i.indexrelid
JOIN pg_am am ON am.oid = ic.relam
LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u')
WHERE i.indrelid = $1::regclass
ORDER BY CASE WHEN am.amname = 'gist' AND EXISTS (
           SELECT 1 FROM unnest(i.indclass::oid[]) AS oc(oid) JOIN pg_opclass o ON o.oid = oc.oid
           WHERE NOT EXISTS (SELECT 1 FROM pg_amproc p WHERE p.amprocfamily = o.opcfamily AND p.amprocnum = 11))
         THEN 0
         WHEN am.amname = 'btree' THEN 2 ELSE 1 END, 2`

// plan lists the statements that build the layer's indexes on the staging
// table under temporary names, and those that give them the layer's names
// after the swap. A primary key or unique constraint is built as a plain
// unique index, then added on it: adding it outright would lock the
// staging table against the other builds.
func (s *stager) plan(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, stagedIndexesSQL, s.table)
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	defer rows.Close()
	for i := 0; rows.Next(); i++ {
		var kind, name, def, constraint string
		if err := rows.Scan(&kind, &name, &def, &constraint); err != nil {
			return fmt.Errorf("list indexes: %w", err)
		}
		head, using, ok := strings.Cut(def, " USING ")
		if !ok || !strings.HasPrefix(head, "CREATE ") {
			return fmt.Errorf("index %s: unexpected definition", name)
		}
		unique := ""
		if strings.HasPrefix(head, "CREATE UNIQUE ") {
			unique = "UNIQUE "
		}
		// An index lives in its table's schema: created and used under its
		// bare name, renamed under its qualified one.
		tmp := pgx.Identifier{fmt.Sprintf("%s_%d", stagingTable(s.layer), i)}.Sanitize()
		final := pgx.Identifier{name}.Sanitize()
		s.builds = append(s.builds, "CREATE "+unique+"INDEX "+tmp+" ON "+s.staging+" USING "+using)
		if kind == "c" {
			s.renames = append(s.renames, "ALTER TABLE "+s.table+" ADD CONSTRAINT "+final+" "+strings.Replace(constraint, "%s", tmp, 1))
		} else {
			s.renames = append(s.renames, "ALTER INDEX "+s.schema+"."+tmp+" RENAME TO "+final)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	return nil
}

// buildConns is how many index builds run at once. Two: the costliest,
// the geography GiST, runs alone on one connection while the others follow
// each other on the second. On two cores that ends sooner than three builds
// sharing them (measured), and more connections cannot end before the
// geography build anyway.
const buildConns = 2

// buildConfig is the configuration of the index builds' connections.
func (s *stager) buildConfig() *pgx.ConnConfig {
	cfg := s.cfg.Copy()
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["maintenance_work_mem"] = buildMemory
	// The builds already run side by side, and the longest, the geography
	// GiST, cannot use parallel workers.
	cfg.RuntimeParams["max_parallel_maintenance_workers"] = "0"
	cfg.RuntimeParams["synchronous_commit"] = "off"
	return cfg
}

// warmCast makes a server process load PostGIS and set up what the cast
// to geography needs (35-50 ms on its first call, measured), as the
// geography index build does first.
const warmCast = "SELECT 'SRID=4326;POINT(0 0)'::geometry::geography"

// dial opens n connections for the index builds in the background, while
// COPY runs, and has each run warmCast. The returned func waits for them;
// one that failed to open is nil, and build opens it again, so that its
// error is reported.
func (s *stager) dial(ctx context.Context, n int) func() []*pgx.Conn {
	conns := make([]*pgx.Conn, n)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Go(func() {
			c, err := pgx.ConnectConfig(ctx, s.buildConfig())
			if err != nil {
				return
			}
			if _, err := c.Exec(ctx, warmCast); err != nil {
				c.Close(context.WithoutCancel(ctx)) //nolint:errcheck // build opens another
				return
			}
			conns[i] = c
		})
	}
	return func() []*pgx.Conn {
		wg.Wait()
		return conns
	}
}

// build runs the index builds on the connections (one worker each), the
// costliest first, and stops them all at the first failure.
func (s *stager) build(ctx context.Context, conns []*pgx.Conn) error {
	queue := make(chan string, len(s.builds))
	for _, stmt := range s.builds {
		queue <- stmt
	}
	close(queue)
	g, gctx := errgroup.WithContext(ctx)
	for _, conn := range conns[:min(len(conns), len(s.builds))] {
		g.Go(func() error {
			if conn == nil {
				c, err := pgx.ConnectConfig(gctx, s.buildConfig())
				if err != nil {
					return fmt.Errorf("database: %w", err)
				}
				defer c.Close(context.WithoutCancel(gctx)) //nolint:errcheck // nothing left to do on it
				conn = c
			}
			for stmt := range queue {
				if _, err := conn.Exec(gctx, stmt); err != nil {
					return fmt.Errorf("build index: %w", err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// swap puts the staging table in the layer's place in one transaction.
// An import that was not a replace finds the layer empty, as canStage saw
// it, or appends the staged rows; or, with IfEmpty, reports notEmpty and
// leaves the layer alone.
func (s *stager) swap(ctx context.Context, o Options) (notEmpty bool, err error) {
	tx, err := s.conn.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("database: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, "LOCK TABLE "+s.table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return false, fmt.Errorf("lock %s: %w", s.layer, err)
	}
	if !o.Replace {
		var empty bool
		if err := tx.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM "+s.table+")").Scan(&empty); err != nil {
			return false, fmt.Errorf("database: %w", err)
		}
		if !empty {
			if o.IfEmpty {
				return true, nil
			}
			return false, s.appendStaged(ctx, tx)
		}
	}
	stmts, err := s.swapStatements(ctx, tx, o.Replace)
	if err != nil {
		return false, err
	}
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return false, fmt.Errorf("swap %s: %w", s.layer, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return false, nil
}

// swapTriggersSQL recreates the layer's triggers and its comment; run
// after the rename, the definitions name the new table.
const swapTriggersSQL = `
SELECT pg_get_triggerdef(t.oid) FROM pg_trigger t WHERE t.tgrelid = $1::regclass AND NOT t.tgisinternal
UNION ALL
SELECT format('COMMENT ON TABLE %s IS %L', $1::regclass, d)
FROM obj_description($1::regclass, 'pg_class') d WHERE d IS NOT NULL`

// swapStatements lists the swap: the staging table's id sequence moves
// past every id the layer's gave out; a replace truncates the layer first,
// so that its TRUNCATE triggers fire as for an in-place replace (the tile
// version bumps); the layer is dropped and the staging table, its indexes
// and sequence take its names; its triggers are recreated, and an insert
// of no rows fires its statement-level INSERT triggers, as COPY would.
func (s *stager) swapStatements(ctx context.Context, tx pgx.Tx, replace bool) ([]string, error) {
	layer, staging := s.table, s.staging
	var seqName string
	err := tx.QueryRow(ctx, `
SELECT s.relname::text, setval(pg_get_serial_sequence($2, 'id'), nextval(pg_get_serial_sequence($1, 'id')))
FROM pg_class s WHERE s.oid = pg_get_serial_sequence($1, 'id')::regclass`, layer, staging).Scan(&seqName, nil)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	var stmts []string
	if replace {
		stmts = append(stmts, "TRUNCATE "+s.table)
	}
	stmts = append(stmts, "DROP TABLE "+s.table, "ALTER TABLE "+s.staging+" RENAME TO "+pgx.Identifier{string(s.layer)}.Sanitize())
	stmts = append(stmts, s.renames...)
	var seq string
	if err := tx.QueryRow(ctx, "SELECT pg_get_serial_sequence($1, 'id')", staging).Scan(&seq); err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	// pg_get_serial_sequence quotes the name it returns.
	stmts = append(stmts, "ALTER SEQUENCE "+seq+" RENAME TO "+pgx.Identifier{seqName}.Sanitize())
	rows, err := tx.Query(ctx, swapTriggersSQL, layer)
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	recreate, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list triggers: %w", err)
	}
	stmts = append(stmts, recreate...)
	return append(stmts, "INSERT INTO "+s.table+" OVERRIDING SYSTEM VALUE SELECT * FROM "+s.table+" WHERE false"), nil
}

// appendStaged adds the staged rows to a layer that filled up during the
// import, and drops the staging table.
func (s *stager) appendStaged(ctx context.Context, tx pgx.Tx) error {
	var cols string
	err := tx.QueryRow(ctx, `
SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute
WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped`, s.staging).Scan(&cols)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	stmts := []string{
		"INSERT INTO " + s.table + " (" + cols + ") OVERRIDING SYSTEM VALUE SELECT " + cols + " FROM " + s.staging,
		"DROP TABLE " + s.staging,
	}
	for _, stmt := range stmts {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("append to %s: %w", s.layer, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// drop removes the staging table after a failure, if it was created. A
// failed COPY may have closed the import's connection: a new one does it
// then. If even that fails, the next import of the layer drops it.
func (s *stager) drop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	conn := s.conn
	if conn.IsClosed() {
		c, err := pgx.ConnectConfig(ctx, s.cfg)
		if err != nil {
			return
		}
		defer c.Close(ctx) //nolint:errcheck // nothing left to do on it
		conn = c
	}
	conn.Exec(ctx, "DROP TABLE IF EXISTS "+s.staging) //nolint:errcheck // see above
}
