package geofence

import (
	"fmt"

	"github.com/geogate/geogate/internal/catalog"
	"github.com/jackc/pgx/v5"
)

// crossesBatchSQL finds the features of l whose polygons a batch of
// segments meets: $1 and $2 are the arrays of the segments' first
// longitudes and latitudes, $3 and $4 of their last; each row a segment's
// index (1-based) and the key, as text, of a feature it meets. A segment
// is straight in the layer's own coordinates (on the sphere for a
// geography column). Segments longer than half the world across, which
// would be drawn the wrong way round the globe, meet nothing.
func crossesBatchSQL(l *catalog.Layer, own string) string {
	key, _ := keyExpr(l, "l")
	join := "JOIN " + l.Qualified() + " l ON " + holds(l, "l", "sg.g")
	if l.Parts != nil {
		join, key = partsJoin(l, own, "sg.g")
	}
	return fmt.Sprintf(`
SELECT m.i, m.k::text FROM (
  SELECT DISTINCT sg.i, %s AS k
  FROM %s
  %s
) m
ORDER BY m.i, m.k`, key, segmentsFrom(l), join)
}

// segmentsFrom is the FROM item sg(i, g) of the segments from ($1, $2) to
// ($3, $4) in l's SRID, numbered from 1.
func segmentsFrom(l *catalog.Layer) string {
	line := "ST_MakeLine(ST_SetSRID(ST_MakePoint(u.x1, u.y1), 4326), ST_SetSRID(ST_MakePoint(u.x2, u.y2), 4326))"
	switch {
	case l.Geography:
		line += "::geography"
	case l.SRID != 4326:
		line = fmt.Sprintf("ST_Transform(%s, %d)", line, l.SRID)
	}
	return fmt.Sprintf(`(SELECT u.i::integer AS i, %s AS g
        FROM unnest($1::float8[], $2::float8[], $3::float8[], $4::float8[]) WITH ORDINALITY AS u(x1, y1, x2, y2, i)
        WHERE abs(u.x2 - u.x1) <= 180) sg`, line)
}

// QueueCrossing queues, in b, finding the features of layer each
// segment from (x1[i], y1[i]) to (x2[i], y2[i]) meets (crossesBatchSQL).
// ok is false for an unknown layer, one without polygons or one without
// coordinates: nothing is queued.
func (s *Service) QueueCrossing(b *pgx.Batch, layer string, x1, y1, x2, y2 []float64) (*Found, bool) {
	l, err := s.polygonLayer(layer)
	if err != nil {
		return nil, false
	}
	return queueFound(b, len(x1), l.crossesBatch, x1, y1, x2, y2), true
}
