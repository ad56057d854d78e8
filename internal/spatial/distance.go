package spatial

import "math"

// meanRadius is the Earth's mean radius in metres (IUGG).
const meanRadius = 6371008.8

// SphereMetres is the distance between two longitude/latitude points on a
// sphere of the Earth's mean radius (haversine): within 0.5% of the
// spheroid, close enough to compare with a GPS accuracy or to pace a
// simulated vehicle, never for an answer about fences.
func SphereMetres(lng1, lat1, lng2, lat2 float64) float64 {
	rad := math.Pi / 180
	dLat, dLng := (lat2-lat1)*rad, (lng2-lng1)*rad
	a := math.Sin(dLat/2)*math.Sin(dLat/2) + math.Cos(lat1*rad)*math.Cos(lat2*rad)*math.Sin(dLng/2)*math.Sin(dLng/2)
	return 2 * meanRadius * math.Asin(math.Min(1, math.Sqrt(a)))
}
