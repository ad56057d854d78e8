package pg

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// PrepareCallerRoles readies the database roles callers may run as
// (DB_CALLER_ROLES) at start. Each needs to exist and be one the login
// role may SET ROLE to; one that is not is logged, and the requests of
// callers that have it are refused (403) until it is. Each is granted
// what the statements of every route read of geogate's own schema own
// besides the layer: the schema's functions and the data versions
// (tile_versions). Nothing else there (the API keys above all) is
// granted.
func PrepareCallerRoles(ctx context.Context, db *pgxpool.Pool, own string, roles []string, log *slog.Logger) error {
	if len(roles) > 0 {
		if err := checkLeakproof(ctx, db, log); err != nil {
			return err
		}
	}
	for _, r := range roles {
		var exists, member bool
		err := db.QueryRow(ctx, `SELECT r.oid IS NOT NULL, coalesce(pg_has_role(current_user, r.oid, 'MEMBER'), false)
			FROM (SELECT $1::text AS name) n LEFT JOIN pg_roles r ON r.rolname = n.name`, r).Scan(&exists, &member)
		if err != nil {
			return err
		}
		if !exists || !member {
			log.Error("DB_CALLER_ROLES: a role is missing, or the login role is not a member of it (GRANT it to the login role); its callers are refused until it is", "role", r, "exists", exists)
			continue
		}
		q := pgx.Identifier{r}.Sanitize()
		for _, sql := range []string{
			"GRANT USAGE ON SCHEMA " + pgx.Identifier{own}.Sanitize() + " TO " + q,
			"GRANT SELECT ON " + pgx.Identifier{own, "tile_versions"}.Sanitize() + " TO " + q,
		} {
			if _, err := db.Exec(ctx, sql); err != nil {
				return err
			}
		}
	}
	return nil
}

// indexOperators are the functions of the operators through which
// geogate's statements reach a layer's spatial index (&&).
var indexOperators = []string{"geometry_overlaps(geometry, geometry)", "geography_overlaps(geography, geography)"}

// checkLeakproof warns when PostGIS's index operators are not LEAKPROOF.
// Under row-level security PostgreSQL applies a condition before the
// policies only when its functions are, so a spatial filter on a layer
// that runs as its caller reads the whole table instead of its index.
// Marking them is a superuser's decision; the warning says how.
func checkLeakproof(ctx context.Context, db *pgxpool.Pool, log *slog.Logger) error {
	rows, err := db.Query(ctx, `SELECT f FROM unnest($1::text[]) f
		WHERE to_regprocedure(f) IS NOT NULL AND NOT (SELECT proleakproof FROM pg_proc WHERE oid = to_regprocedure(f))`, indexOperators)
	if err != nil {
		return err
	}
	fns, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, f := range fns {
		log.Warn("layers that run as their caller cannot use their spatial indexes under row-level security until a superuser marks PostGIS's && LEAKPROOF (see docs/operations/publishing.md)",
			"run", "ALTER FUNCTION "+f+" LEAKPROOF")
	}
	return nil
}
