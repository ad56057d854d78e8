package geofence

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
)

// A layer's subdivided copy (api publish --contains) is a table of
// geogate's schema, (key, geom), filled from the layer's table and kept
// exact by four statement-level triggers on it calling
// layer_parts_sync (migration 00011): after INSERT, UPDATE and DELETE,
// with their transition tables, and after TRUNCATE. In the writing
// transaction they cut the rows a statement added or changed the geometry
// or key of and drop the parts of those it removed, so a query sees the
// copy and the table from one snapshot. A statement costs a writer the
// cutting of its new polygons; updates of other columns cut nothing.

// ErrNoCopy says a layer cannot have a subdivided copy; its containment
// checks read the table through its own index.
var ErrNoCopy = errors.New("no subdivided copy")

// partsNames are the names of a layer's copy and of its triggers; they
// depend on the relation and column alone, so that a copy is found again
// by whoever installs or removes it.
type partsNames struct {
	table    string
	triggers [4]string // insert, update, delete, truncate
}

var unsafeName = regexp.MustCompile(`[^a-z0-9_]+`)

func namesOf(l *catalog.Layer) partsNames {
	sum := sha256.Sum256([]byte(l.Schema + "\x00" + l.Table + "\x00" + l.Column))
	h := hex.EncodeToString(sum[:5])
	base := strings.Trim(unsafeName.ReplaceAllString(strings.ToLower(l.Table), "_"), "_")
	if len(base) > 40 {
		base = base[:40]
	}
	t := "geogate_parts_" + h
	return partsNames{table: "parts_" + base + "_" + h, triggers: [4]string{t + "_insert", t + "_update", t + "_delete", t + "_truncate"}}
}

// eligible returns why l cannot have a copy, or nil: it must be a plain
// table (views fire no triggers; writes to a partition or an inheritance
// child fire none of its parent's), of geometry (ST_Subdivide cuts along
// straight lines in the plane, while geography edges follow great
// circles), with polygons, a key, an SRID its column type enforces and a
// key of a type whose equality the trigger's fixed search_path finds.
func eligible(ctx context.Context, tx pgx.Tx, l *catalog.Layer) error {
	var kind string
	var partition, children, builtinKey bool
	var srid int
	err := tx.QueryRow(ctx, `
		SELECT c.relkind::text, c.relispartition, c.relhassubclass,
		       coalesce((SELECT g.srid FROM geometry_columns g
		                 WHERE g.f_table_schema = $1 AND g.f_table_name = $2 AND g.f_geometry_column = $3), 0),
		       coalesce((SELECT bt.typnamespace IN ('pg_catalog'::regnamespace, (SELECT extnamespace FROM pg_extension WHERE extname = 'postgis'))
		        FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
		        JOIN pg_type bt ON bt.oid = CASE WHEN t.typtype = 'd' THEN t.typbasetype ELSE t.oid END
		        WHERE a.attrelid = c.oid AND a.attname = $4), false)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`,
		l.Schema, l.Table, l.Column, l.Key.Column).Scan(&kind, &partition, &children, &srid, &builtinKey)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("no such table")
	case err != nil:
		return err
	case kind != "r" || partition:
		return fmt.Errorf("%w: not a plain table (a view, materialized view, partitioned table or partition fires no trigger for every write)", ErrNoCopy)
	case children:
		return fmt.Errorf("%w: the table has inheritance children, whose writes fire none of its triggers", ErrNoCopy)
	case !l.Polygonal():
		return fmt.Errorf("%w: %s holds %s geometries, not polygons", ErrNoCopy, l.Column, l.GeometryType)
	case l.Geography:
		return fmt.Errorf("%w: a geography column (its edges are great circles; cutting it along straight lines would change it)", ErrNoCopy)
	case l.Key.FromRow():
		return fmt.Errorf("%w: the table has no primary key or unique not-null column to name its rows by", ErrNoCopy)
	case srid <= 0:
		return fmt.Errorf("%w: the column's type names no SRID", ErrNoCopy)
	case !builtinKey:
		return fmt.Errorf("%w: the key %s is of a type outside PostgreSQL's and PostGIS's own", ErrNoCopy, l.Key.Column)
	}
	return nil
}

// copyTriggersSQL lists the triggers on schema.table that call geogate's
// copy function in schema $3, with their arguments.
const copyTriggersSQL = `
SELECT t.tgname::text, t.tgargs FROM pg_trigger t
WHERE t.tgrelid = (quote_ident($1) || '.' || quote_ident($2))::regclass
  AND t.tgfoid = to_regprocedure(quote_ident($3) || '.layer_parts_sync()')
ORDER BY 1`

// installed is what keeps a copy of l's column now: the triggers, found by
// their function and arguments whatever their names (the table may have
// been renamed since), and the copy they name, if it exists.
type installed struct {
	triggers []string
	copy     string // "" when no trigger names one
	exists   bool
}

func findInstalled(ctx context.Context, tx pgx.Tx, own string, l *catalog.Layer) (installed, error) {
	var in installed
	rows, err := tx.Query(ctx, copyTriggersSQL, l.Schema, l.Table, own)
	if err != nil {
		return in, err
	}
	var name string
	var args []byte
	_, err = pgx.ForEachRow(rows, []any{&name, &args}, func() error {
		a := strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00")
		if len(a) == 3 && a[2] == l.Column {
			in.triggers = append(in.triggers, name)
			in.copy = a[0]
		}
		return nil
	})
	if err != nil || in.copy == "" {
		return in, err
	}
	err = tx.QueryRow(ctx, "SELECT to_regclass(quote_ident($1) || '.' || quote_ident($2)) IS NOT NULL", own, in.copy).Scan(&in.exists)
	return in, err
}

// InstallParts builds the subdivided copy of l's polygons in schema own
// and the triggers that keep it exact, unless they are in place, in one
// transaction that holds writers of the table off meanwhile. It returns
// what it did, for the operator; a layer that cannot have a copy fails
// with ErrNoCopy.
func InstallParts(ctx context.Context, db *pgxpool.Pool, own string, l *catalog.Layer) (string, error) {
	if l.Parts != nil && l.Parts.Table == "geofence_parts" {
		return fmt.Sprintf("already subdivided (the fences' own copy, %s.geofence_parts)", own), nil
	}
	n := namesOf(l)
	var did string
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if err := eligible(ctx, tx, l); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "LOCK TABLE "+l.Qualified()+" IN SHARE ROW EXCLUSIVE MODE"); err != nil {
			return err
		}
		in, err := findInstalled(ctx, tx, own, l)
		if err != nil {
			return err
		}
		if len(in.triggers) == len(n.triggers) && in.exists {
			did = fmt.Sprintf("already subdivided (copy %s.%s, triggers in place)", own, in.copy)
			return nil
		}
		if err := exec(ctx, tx, dropParts(own, l, in)); err != nil {
			return err
		}
		parts, err := buildParts(ctx, tx, own, l, n)
		if err != nil {
			return err
		}
		did = fmt.Sprintf("subdivided: copy %s.%s built (%d parts), triggers %s_* installed", own, n.table, parts, strings.TrimSuffix(n.triggers[0], "_insert"))
		return nil
	})
	return did, err
}

// buildParts creates l's copy, fills and indexes it, and creates its
// triggers; it returns how many parts the copy holds.
func buildParts(ctx context.Context, tx pgx.Tx, own string, l *catalog.Layer, n partsNames) (int64, error) {
	table, dst := l.Qualified(), catalog.QuoteIdent(own)+"."+catalog.QuoteIdent(n.table)
	key, col := catalog.QuoteIdent(l.Key.Column), catalog.QuoteIdent(l.Column)
	fn := fmt.Sprintf("%s.layer_parts_sync(%s, %s, %s)", catalog.QuoteIdent(own), literal(n.table), literal(l.Key.Column), literal(l.Column))
	trigger := func(i int, event, transition string) string {
		return fmt.Sprintf("CREATE TRIGGER %s AFTER %s ON %s %s FOR EACH STATEMENT EXECUTE FUNCTION %s",
			catalog.QuoteIdent(n.triggers[i]), event, table, transition, fn)
	}
	err := exec(ctx, tx, []string{
		// The key column is made from the table's, so that it has its
		// type, modifier and collation.
		fmt.Sprintf("CREATE TABLE %s AS SELECT l.%s AS key, NULL::geometry(Geometry, %d) AS geom FROM %s l WITH NO DATA", dst, key, l.SRID, table),
		fmt.Sprintf("ALTER TABLE %s ALTER COLUMN key SET NOT NULL, ALTER COLUMN geom SET NOT NULL", dst),
		fmt.Sprintf("INSERT INTO %s (key, geom) SELECT l.%s, x FROM %s l, %s.layer_parts_of(l.%s) AS x", dst, key, table, catalog.QuoteIdent(own), col),
		fmt.Sprintf("CREATE INDEX ON %s USING spgist (geom)", dst), // see migration 00020
		fmt.Sprintf("CREATE INDEX ON %s (key)", dst),
		trigger(0, "INSERT", "REFERENCING NEW TABLE AS geogate_new"),
		trigger(1, "UPDATE", "REFERENCING OLD TABLE AS geogate_old NEW TABLE AS geogate_new"),
		trigger(2, "DELETE", "REFERENCING OLD TABLE AS geogate_old"),
		trigger(3, "TRUNCATE", ""),
		"ANALYZE " + dst,
	})
	if err != nil {
		return 0, err
	}
	var parts int64
	err = tx.QueryRow(ctx, "SELECT count(*) FROM "+dst).Scan(&parts)
	return parts, err
}

// dropParts are the statements that drop the triggers and the copy of
// in, and anything under the names InstallParts gives l's.
func dropParts(own string, l *catalog.Layer, in installed) []string {
	n := namesOf(l)
	var out []string
	for _, t := range append(in.triggers, n.triggers[:]...) {
		out = append(out, fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", catalog.QuoteIdent(t), l.Qualified()))
	}
	for _, t := range []string{in.copy, n.table} {
		if t != "" {
			out = append(out, "DROP TABLE IF EXISTS "+catalog.QuoteIdent(own)+"."+catalog.QuoteIdent(t))
		}
	}
	return out
}

func exec(ctx context.Context, tx pgx.Tx, steps []string) error {
	for _, q := range steps {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// RemoveParts drops the copy of l's polygons and its triggers; its
// containment checks then read the table through its own index. It
// returns what it did.
func RemoveParts(ctx context.Context, db *pgxpool.Pool, own string, l *catalog.Layer) (string, error) {
	var did string
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		in, err := findInstalled(ctx, tx, own, l)
		if err != nil {
			return err
		}
		if len(in.triggers) == 0 {
			did = "not subdivided; nothing to remove"
			return nil
		}
		if err := exec(ctx, tx, dropParts(own, l, in)); err != nil {
			return err
		}
		did = fmt.Sprintf("copy %s.%s and its triggers removed; containment reads the table through its index", own, in.copy)
		return nil
	})
	return did, err
}

// literal quotes s as an SQL string literal (standard_conforming_strings
// on, as since PostgreSQL 9.1 by default).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
