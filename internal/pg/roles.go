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
