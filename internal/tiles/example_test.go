package tiles_test

import (
	"fmt"

	"github.com/geogate/geogate/internal/tiles"
)

func ExampleParseTile() {
	for _, p := range [][3]string{{"4", "8", "5"}, {"4", "16", "5"}, {"4", "8", "5.5"}} {
		t, ok := tiles.ParseTile(p[0], p[1], p[2])
		if !ok {
			fmt.Printf("%s/%s/%s: no such tile\n", p[0], p[1], p[2])
			continue
		}
		minLng, minLat, maxLng, maxLat := t.Bounds(0)
		fmt.Printf("%s: lng %.2f..%.2f, lat %.2f..%.2f\n", t, minLng, maxLng, minLat, maxLat)
	}
	// Output:
	// 4/8/5: lng 0.00..22.50, lat 40.98..55.78
	// 4/16/5: no such tile
	// 4/8/5.5: no such tile
}
