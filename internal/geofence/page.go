package geofence

import (
	"strconv"
	"strings"
)

// pageBytes is the byte budget of one page of features: fences may carry
// megabytes of properties each, so a page bounded by its row count alone
// could make a request build gigabytes. Rows are weighed as they are read
// and the page ends before the first one that would pass the budget; the
// next link then starts at that row, so following it loses nothing.
type pageBytes struct {
	max  int // 0: no budget
	used int
}

// fits reports whether a feature of n encoded bytes may join the page,
// and counts it when it does. The first feature always fits, however
// large: a page without it would never get past it.
func (p *pageBytes) fits(n int) bool {
	if p.max > 0 && p.used > 0 && p.used+n > p.max {
		return false
	}
	p.used += n
	return true
}

// budgetSQL is the statement sel (rows ordered by order, with the text
// columns props and geo, NULL allowed) stopped in the database after the
// second row at the first whose preceding rows' props and geo take param
// bytes or more (param NULL: never), then its columns cols in order.
//
// The rows past the page are then neither sent nor read: pgx would
// otherwise read and drop every one of them before the connection could
// serve again. The client must still learn that more remain, so the row
// after the page's last must come: after a first row over the budget
// (alone on its page) that is the second; after any other, a row whose
// preceding rows fit the budget as pageBytes counts them, which is more
// than their props and geo.
func budgetSQL(sel, cols string, order []string, param string) string {
	// Qualified, so that an output column of the same name (k::text is
	// k) does not order the answer instead.
	by := func(alias string) string { return alias + "." + strings.Join(order, ", "+alias+".") }
	return `
SELECT ` + cols + ` FROM (
  SELECT b.*, row_number() OVER o AS n,
    coalesce(sum(octet_length(b.props) + coalesce(octet_length(b.geo), 0))
      OVER (o ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS before
  FROM (` + sel + `) b
  WINDOW o AS (ORDER BY ` + by("b") + `)
) w
WHERE ` + param + `::bigint IS NULL OR w.n <= 2 OR w.before < ` + param + `
ORDER BY ` + by("w")
}

// featureSize is the length of appendFeature(nil, f, withDistance), plus
// one for the comma between features, computed without copying the
// feature's properties and geometry.
func featureSize(f Feature, withDistance bool) int {
	n := len(`{"type":"Feature","id":`) + len(`,"geometry":`) + len(`,"properties":`) + len(`}`) + 1
	if f.Key != nil {
		n += len(f.Key)
	} else {
		n += len(strconv.AppendInt(nil, f.ID, 10))
	}
	if len(f.Geometry) == 0 {
		n += len("null")
	} else {
		n += len(f.Geometry)
	}
	var dist *float64
	if withDistance {
		dist = &f.Distance
	}
	return n + propsSize(f, dist)
}

// propsSize is the length of appendProps(nil, f, dist).
func propsSize(f Feature, dist *float64) int {
	inner := len(trimObject(f.Props))
	n := len("{}") + inner
	more := inner > 0
	if !f.NoName {
		if more {
			n++
		}
		n += len(`"name":`) + len(appendString(nil, f.Name))
		more = true
	}
	if dist != nil {
		if more {
			n++
		}
		var buf [32]byte
		n += len(`"distance_m":`) + len(strconv.AppendFloat(buf[:0], *dist, 'f', -1, 64))
	}
	return n
}
