package importer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// loader runs the SQL side of one import inside its transaction. Table
// names come only from the Layer constants.
type loader struct {
	tx         pgx.Tx
	layer      Layer
	layerTable string   // the layer's table, quoted
	table      string   // where COPY writes, quoted: the layer or its staging table
	indexes    []string // statements recreating what a bulk load dropped
	seq        string   // the layer's id sequence
}

// prepare locks the layer and decides how to load it. A bulk load (the
// layer is replaced or empty) truncates the table and drops its secondary
// indexes, to rebuild them once after COPY: much faster than growing
// them row by row. proceed is false when IfEmpty found rows.
func (l *loader) prepare(ctx context.Context, o Options) (bulk, proceed bool, err error) {
	table := l.layerTable
	// The import transaction needs no durability wait at commit beyond
	// the WAL flush that follows shortly; a crash before it loses only
	// this import, never earlier data.
	if _, err := l.tx.Exec(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
		return false, false, fmt.Errorf("database: %w", err)
	}
	if _, err := l.tx.Exec(ctx, "SET LOCAL maintenance_work_mem = '256MB'"); err != nil {
		return false, false, fmt.Errorf("database: %w", err)
	}
	bulk = o.Replace
	if !o.Replace {
		// Writers wait; readers go on until the bulk path needs more.
		if _, err := l.tx.Exec(ctx, "LOCK TABLE "+table+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return false, false, fmt.Errorf("lock %s: %w", l.layer, err)
		}
		var empty bool
		if err := l.tx.QueryRow(ctx, "SELECT NOT EXISTS (SELECT 1 FROM "+table+")").Scan(&empty); err != nil {
			return false, false, fmt.Errorf("database: %w", err)
		}
		if !empty && o.IfEmpty {
			return false, false, nil
		}
		bulk = empty
	}
	if !bulk {
		return false, true, nil
	}
	if _, err := l.tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return false, false, fmt.Errorf("lock %s: %w", l.layer, err)
	}
	if err := l.dropIndexes(ctx, table); err != nil {
		return false, false, err
	}
	if _, err := l.tx.Exec(ctx, "TRUNCATE "+table); err != nil {
		return false, false, fmt.Errorf("truncate %s: %w", l.layer, err)
	}
	return true, true, nil
}

// indexesSQL lists what a bulk load drops and rebuilds: the table's
// indexes that back no constraint, and its primary key and unique
// constraints that no foreign key depends on. Constraints come first, so
// that they are rebuilt first.
const indexesSQL = `
SELECT 'ALTER TABLE ' || $1 || ' DROP CONSTRAINT ' || quote_ident(c.conname),
       'ALTER TABLE ' || $1 || ' ADD CONSTRAINT ' || quote_ident(c.conname) || ' ' || pg_get_constraintdef(c.oid)
FROM pg_constraint c
WHERE c.conrelid = $1::regclass AND c.contype IN ('p', 'u')
  AND NOT EXISTS (SELECT 1 FROM pg_constraint f WHERE f.contype = 'f' AND f.conindid = c.conindid)
UNION ALL
SELECT 'DROP INDEX ' || i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid)
FROM pg_index i
WHERE i.indrelid = $1::regclass
  AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)`

func (l *loader) dropIndexes(ctx context.Context, table string) error {
	rows, err := l.tx.Query(ctx, indexesSQL, table)
	if err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	var drops []string
	for rows.Next() {
		var drop, create string
		if err := rows.Scan(&drop, &create); err != nil {
			return fmt.Errorf("list indexes: %w", err)
		}
		drops = append(drops, drop)
		l.indexes = append(l.indexes, create)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list indexes: %w", err)
	}
	// The statements hold only names from the catalog, quoted by it.
	for _, drop := range drops {
		if _, err := l.tx.Exec(ctx, drop); err != nil {
			return fmt.Errorf("%s: %w", drop, err)
		}
	}
	return nil
}

// firstID returns the next id of the layer's sequence. The rows get
// consecutive ids from there, assigned by the client: cheaper than a
// nextval per row, and safe because the lock held keeps other writers
// out until the sequence is moved past them (see copy).
func (l *loader) firstID(ctx context.Context) (int64, error) {
	var id int64
	err := l.tx.QueryRow(ctx, "SELECT pg_get_serial_sequence($1, 'id'), nextval(pg_get_serial_sequence($1, 'id'))",
		string(l.layer)).Scan(&l.seq, &id)
	if err != nil {
		return 0, fmt.Errorf("database: %w", err)
	}
	return id, nil
}

// copy streams the rows through binary COPY, then moves the id sequence
// past the ids used. A bulk load freezes the rows as it writes them (the
// table was created or truncated in this transaction), which spares the
// index builds and the first readers the visibility bookkeeping.
func (l *loader) copy(ctx context.Context, p *pipeline, bulk bool, first int64) (int64, error) {
	sql := "COPY " + l.table + " (id, name, properties, geom) FROM STDIN (FORMAT binary"
	if bulk {
		sql += ", FREEZE"
	}
	tag, err := l.tx.Conn().PgConn().CopyFrom(ctx, p.r, sql+")")
	if err != nil {
		return 0, fmt.Errorf("copy into %s: %w", l.layer, err)
	}
	n := tag.RowsAffected()
	if n > 0 {
		if _, err := l.tx.Exec(ctx, "SELECT setval($1, $2)", l.seq, first+n-1); err != nil {
			return n, fmt.Errorf("database: %w", err)
		}
	}
	return n, nil
}

// finish rebuilds the indexes dropped for a bulk load. Planner statistics
// are left to autovacuum, as after any COPY; see Analyze.
func (l *loader) finish(ctx context.Context) error {
	for _, def := range l.indexes {
		if _, err := l.tx.Exec(ctx, def); err != nil {
			return fmt.Errorf("rebuild index: %w", err)
		}
	}
	return nil
}
