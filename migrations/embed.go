// Package migrations embeds geogate's numbered, forward-only SQL migrations
// so that the binary and the tests apply exactly the same schema.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
