package features

import (
	"context"
	"slices"
	"strconv"

	"github.com/geogate/geogate/internal/pg"
)

// sampleRows is how many rows of a layer of geogate's own shape are read
// to learn the names and types of its stored properties.
const sampleRows = 1000

// sample adds to l's queryables the stored properties of its first rows
// that always hold one JSON type: a string, a number or a boolean.
func (s *Service) sample(ctx context.Context, l *layerSQL) error {
	var names []string
	types := map[string]string{}
	err := s.run.Do(ctx, func(ctx context.Context, conn pg.Conn) error {
		rows, err := conn.Query(ctx, `SELECT e.key, jsonb_typeof(e.value)
FROM (SELECT properties FROM `+l.l.Qualified()+` WHERE properties IS NOT NULL LIMIT `+strconv.Itoa(sampleRows)+`) s,
     jsonb_each(s.properties) e
WHERE jsonb_typeof(e.value) <> 'null'
GROUP BY 1, 2 ORDER BY 1`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k, t string
			if err := rows.Scan(&k, &t); err != nil {
				return err
			}
			if prev, ok := types[k]; ok && prev != t {
				types[k] = "mixed"
				continue
			}
			if _, ok := types[k]; !ok {
				names = append(names, k)
			}
			types[k] = t
		}
		return rows.Err()
	})
	if err != nil {
		return err
	}
	for _, k := range names {
		if slices.ContainsFunc(l.queryables, func(q queryable) bool { return q.Name == k }) {
			continue // id and name are columns
		}
		lit := quoteLiteral(k)
		switch types[k] {
		case "string":
			l.queryables = append(l.queryables, queryable{Name: k, SQL: "(l.properties->>" + lit + ")", PGType: "text", Type: "string"})
		case "number":
			l.queryables = append(l.queryables, queryable{Name: k, PGType: "float8", Type: "number",
				SQL: "(CASE WHEN jsonb_typeof(l.properties->" + lit + ") = 'number' THEN (l.properties->>" + lit + ")::float8 END)"})
		case "boolean":
			l.queryables = append(l.queryables, queryable{Name: k, PGType: "boolean", Type: "boolean",
				SQL: "(CASE WHEN jsonb_typeof(l.properties->" + lit + ") = 'boolean' THEN (l.properties->>" + lit + ")::boolean END)"})
		}
	}
	return nil
}
