// Package migrations embeds geogate's numbered SQL migrations so that the
// binary and the tests apply exactly the same schema. Each file names
// geogate's own schema as {{schema}}; internal/pg fills in GEOGATE_SCHEMA
// when it runs them.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
