package geofence

import "math"

// MaxRadiusCost is the most RadiusCost charges.
const MaxRadiusCost = 8

// RadiusCost is the cost of a proximity query of radius meters: 1 up to
// 1 km, then one more per doubling (2 up to 2 km, 3 up to 4 km, 4 up to
// 8 km, ...), capped at MaxRadiusCost (from 64 km on). The work of such a
// query grows with the area searched, so this charges large radii more
// while staying far below the area's quadratic growth. Anything that is not
// a positive finite number costs 1: validation rejects it later.
func RadiusCost(meters float64) int {
	if !(meters > 1000) || math.IsInf(meters, 0) {
		if math.IsInf(meters, 1) {
			return MaxRadiusCost
		}
		return 1
	}
	c := 1 + int(math.Ceil(math.Log2(meters/1000)))
	return min(c, MaxRadiusCost)
}
