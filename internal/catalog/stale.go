package catalog

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
)

// Stale reports whether a query's error says it named a relation, column
// or type that is not, or no longer, what the catalog said: the table was
// dropped, altered or retyped after the layers were read. Read the catalog
// again (Refresh) and answer as for a layer that changed.
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
