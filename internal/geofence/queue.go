package geofence

import "github.com/geogate/geogate/internal/pg"

// QueueIn makes the service's database calls enter q before they take a
// connection (see pg.Runner.Queue); nil sends them straight to the pool.
func (s *Service) QueueIn(q pg.Queue) { s.db.run.Queue = q }
