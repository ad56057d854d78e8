package catalog

import "github.com/geogate/geogate/internal/pg"

// Stale reports whether a query's error says it named a relation, column
// or type that is not, or no longer, what the catalog said (see pg.Stale):
// read the catalog again (Refresh) and answer as for a layer that changed.
func Stale(err error) bool { return pg.Stale(err) }
