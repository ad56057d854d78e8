package tiles

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/catalog"
)

// Exact invalidation of a user's table is two statement-level triggers
// calling geogate's bump function (migrations 00004, 00009): in the
// writing transaction they raise the table's version in tile_versions and
// NOTIFY it, so a tile query, which reads the version and the rows from
// one snapshot, never stores a tile under a version it does not show, and
// every replica hears of the write at commit. Statement triggers cost a
// write one small update per statement, not per row.
const (
	bumpTrigger     = "geogate_tiles_bump"
	truncateTrigger = "geogate_tiles_bump_truncate"
)

// ErrNotATable says a relation cannot carry triggers that see its writes:
// a view's rows change through the tables it reads, a materialized view's
// through REFRESH, which fires none.
var ErrNotATable = errors.New("not a table: views and materialized views cannot report their changes; their tiles are cached for TILES_CACHE_TTL")

// relation is a table as publish finds it in the catalog.
type relation struct {
	kind       string
	qualified  string // quoted
	versionKey string
	// triggers are those on it that call geogate's bump function.
	triggers []string
}

func findRelation(ctx context.Context, tx pgx.Tx, own, schema, table string) (relation, error) {
	r := relation{qualified: catalog.QuoteIdent(schema) + "." + catalog.QuoteIdent(table), versionKey: schema + "." + table}
	err := tx.QueryRow(ctx, `
		SELECT c.relkind::text,
		       ARRAY(SELECT t.tgname::text FROM pg_trigger t WHERE t.tgrelid = c.oid
		             AND t.tgfoid = to_regprocedure(quote_ident($3) || '.geogate_tiles_bump()') ORDER BY 1)
		FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relname = $2`, schema, table, own).Scan(&r.kind, &r.triggers)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, fmt.Errorf("%s.%s: no such table", schema, table)
	}
	return r, err
}

// InstallInvalidation makes every committed change to schema.table retire
// its cached tiles, on every replica, from the next tile on: it creates
// the two triggers (unless they are there) and the table's version row,
// in one transaction. It returns what it did, for the operator.
func InstallInvalidation(ctx context.Context, db *pgxpool.Pool, own, schema, table string) (string, error) {
	var did string
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		r, err := findRelation(ctx, tx, own, schema, table)
		if err != nil {
			return err
		}
		if r.kind != "r" && r.kind != "p" {
			return fmt.Errorf("%s.%s: %w", schema, table, ErrNotATable)
		}
		if len(r.triggers) >= 2 {
			did = "already invalidated exactly (triggers in place)"
			return nil
		}
		fn := catalog.QuoteIdent(own) + ".geogate_tiles_bump()"
		for _, q := range []string{
			fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", bumpTrigger, r.qualified),
			fmt.Sprintf("DROP TRIGGER IF EXISTS %s ON %s", truncateTrigger, r.qualified),
			fmt.Sprintf("CREATE TRIGGER %s AFTER INSERT OR UPDATE OR DELETE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s", bumpTrigger, r.qualified, fn),
			fmt.Sprintf("CREATE TRIGGER %s AFTER TRUNCATE ON %s FOR EACH STATEMENT EXECUTE FUNCTION %s", truncateTrigger, r.qualified, fn),
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s.%s: %w", schema, table, err)
			}
		}
		// The version row outlives a removal: versions only grow, so tiles
		// cached under an old version can never be mistaken for current.
		if _, err := tx.Exec(ctx, "INSERT INTO "+catalog.QuoteIdent(own)+".tile_versions (tbl) VALUES ($1) ON CONFLICT DO NOTHING", r.versionKey); err != nil {
			return err
		}
		did = fmt.Sprintf("invalidated exactly: triggers %s and %s installed", bumpTrigger, truncateTrigger)
		return nil
	})
	return did, err
}

// RemoveInvalidation drops what InstallInvalidation installed on
// schema.table; its tiles are then cached for the TTL. It returns what it
// did.
func RemoveInvalidation(ctx context.Context, db *pgxpool.Pool, own, schema, table string) (string, error) {
	var did string
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		r, err := findRelation(ctx, tx, own, schema, table)
		if err != nil {
			return err
		}
		if len(r.triggers) == 0 {
			did = "not invalidated exactly; nothing to remove"
			return nil
		}
		for _, name := range r.triggers {
			if _, err := tx.Exec(ctx, fmt.Sprintf("DROP TRIGGER %s ON %s", catalog.QuoteIdent(name), r.qualified)); err != nil {
				return fmt.Errorf("%s.%s: %w", schema, table, err)
			}
		}
		did = fmt.Sprintf("triggers %s removed; its tiles are now cached for TILES_CACHE_TTL", strings.Join(r.triggers, " and "))
		return nil
	})
	return did, err
}
