package spatial

import "testing"

// BenchmarkSpatial measures the scope checks a request may make.
func BenchmarkSpatial(b *testing.B) {
	box, poly := mustScope(b, berlinBox), mustScope(b, lShape)
	b.Run("CircleInBox", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			box.ContainsCircle(13.4, 52.5, 500)
		}
	})
	b.Run("CircleInPolygon", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			poly.ContainsCircle(1, 6, 500)
		}
	})
	b.Run("TileIntersectsPolygon", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			poly.IntersectsBBox(1.5, 1.5, 5, 5)
		}
	})
}
