package spatial_test

import (
	"fmt"

	"github.com/geogate/geogate/internal/spatial"
)

// A tile handler asks whether a tile lies inside, across or outside the
// caller's scope before it renders anything.
func ExampleScope_ContainsBBox() {
	scope, _ := spatial.Parse([]byte(`[13,52,14,53]`))
	for _, tile := range [][4]float64{{13.2, 52.2, 13.4, 52.4}, {13.9, 52.9, 14.1, 53.1}, {15, 52, 16, 53}} {
		switch {
		case scope.ContainsBBox(tile[0], tile[1], tile[2], tile[3]):
			fmt.Println("inside: shared cache")
		case scope.IntersectsBBox(tile[0], tile[1], tile[2], tile[3]):
			fmt.Println("straddles: filter")
		default:
			fmt.Println("outside: refuse")
		}
	}
	// Output:
	// inside: shared cache
	// straddles: filter
	// outside: refuse
}
