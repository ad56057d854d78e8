package cql2_test

import (
	"fmt"

	"github.com/geogate/geogate/internal/cql2"
)

func ExampleSQL() {
	queryables := cql2.Columns{
		"name": {SQL: "t.name", Type: "string"},
		"pop":  {SQL: "(t.properties->>'pop')::float8", Type: "number"},
		"geom": {SQL: "t.geom", Type: "geometry", SRID: 3857},
	}
	e, err := cql2.ParseText(`name LIKE 'Ber%' AND pop > 100000 AND S_INTERSECTS(geom, BBOX(13, 52, 14, 53))`, cql2.DefaultLimits())
	if err != nil {
		fmt.Println(err)
		return
	}
	args := []any{100} // a LIMIT, say, bound before the filter
	where, err := cql2.SQL(e, queryables, cql2.CRS{}, &args)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("SELECT * FROM places t WHERE " + where + " LIMIT $1")
	fmt.Println(args[1:])

	_, err = cql2.ParseText(`name LIKE 'Ber%' AND pop >`, cql2.DefaultLimits())
	fmt.Println(err)
	// Output:
	// SELECT * FROM places t WHERE ((t.name LIKE $2::text) AND ((t.properties->>'pop')::float8 > $3::float8) AND ST_Intersects(t.geom, (SELECT ST_Transform(ST_GeomFromText($4::text, 4326), 3857)))) LIMIT $1
	// [Ber% 100000 POLYGON((13 52, 14 52, 14 53, 13 53, 13 52))]
	// at character 27: the filter ends where a property name or a value should be
}
