package tiles

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestParseTile(t *testing.T) {
	tests := []struct {
		name    string
		z, x, y string
		want    Tile
		ok      bool
	}{
		{"OK", "4", "8", "5", Tile{4, 8, 5}, true},
		{"Zero", "0", "0", "0", Tile{0, 0, 0}, true},
		{"MaxXY", "2", "3", "3", Tile{2, 3, 3}, true},
		{"XTooBig", "2", "4", "0", Tile{}, false},
		{"YTooBig", "2", "0", "4", Tile{}, false},
		{"ZTooBig", "31", "0", "0", Tile{}, false},
		{"Negative", "2", "-1", "0", Tile{}, false},
		{"Plus", "+2", "0", "0", Tile{}, false},
		{"NotInteger", "2", "1.5", "0", Tile{}, false},
		{"Letters", "z", "0", "0", Tile{}, false},
		{"Empty", "", "0", "0", Tile{}, false},
		{"Huge", "2", "99999999999999999999", "0", Tile{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseTile(tt.z, tt.x, tt.y)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseTile(%q, %q, %q) = %v, %v; want %v, %v", tt.z, tt.x, tt.y, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name   string
		tile   Tile
		margin float64
		want   [4]float64
	}{
		{"World", Tile{0, 0, 0}, 0, [4]float64{-180, -85.0511, 180, 85.0511}},
		{"WorldWithMarginClamped", Tile{0, 0, 0}, 0.1, [4]float64{-180, -85.0511, 180, 85.0511}},
		{"NorthEast", Tile{1, 1, 0}, 0, [4]float64{0, 0, 180, 85.0511}},
		{"Margin", Tile{2, 2, 1}, 0.5, [4]float64{-45, -40.9799, 135, 79.1713}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, c, d := tt.tile.Bounds(tt.margin)
			for i, v := range []float64{a, b, c, d} {
				if math.Abs(v-tt.want[i]) > 1e-3 {
					t.Errorf("%v.Bounds(%v) = %v, want %v", tt.tile, tt.margin, []float64{a, b, c, d}, tt.want)
					break
				}
			}
		})
	}
}

func TestAcceptsGzip(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{"gzip", true},
		{"gzip, deflate, br", true},
		{"br;q=1.0, gzip;q=0.8", true},
		{"*", true},
		{"gzip;q=0", false},
		{"gzip;q=0.000", false},
		{"identity", false},
		{"", false},
		{"deflate, gzip ; q=0.5", true},
	}
	for _, tt := range tests {
		if got := acceptsGzip(tt.header); got != tt.want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestETagMatch(t *testing.T) {
	tests := []struct {
		header string
		want   bool
	}{
		{`"abc"`, true},
		{`W/"abc"`, true},
		{`"x", "abc"`, true},
		{`"abc-gz"`, true},
		{`W/"abc-gz"`, true},
		{`*`, true},
		{`"abd"`, false},
		{`"abc-gzip"`, false},
		{`"abc"-gz`, false},
		{``, false},
	}
	for _, tt := range tests {
		if got := etagMatch(tt.header, `"abc"`); got != tt.want {
			t.Errorf("etagMatch(%q, \"abc\", \"abc-gz\") = %v, want %v", tt.header, got, tt.want)
		}
	}
}

func TestGzipETag(t *testing.T) {
	if got, want := gzipETag(`"0123abcd"`), `"0123abcd-gz"`; got != want {
		t.Errorf("gzipETag(%q) = %q, want %q", `"0123abcd"`, got, want)
	}
}

// FuzzParseTile: whatever the path segments, ParseTile accepts exactly
// the tiles that exist written as plain decimal digits (at most 10 of
// them), reads them as referenceTile does, and their bounds are a proper
// box inside the world. testdata/fuzz/FuzzParseTile holds the edges: the
// last tile at the highest zoom and one past it, signs, spaces, other
// scripts' digits, exponents, too many digits.
func FuzzParseTile(f *testing.F) {
	for _, s := range [][3]string{{"0", "0", "0"}, {"4", "8", "5"}, {"30", "1073741823", "0"}, {"-1", "0", "0"}, {"01", "1", "1"}, {"2", "+1", "0"}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, z, x, y string) {
		tl, ok := ParseTile(z, x, y)
		want, wantOK := referenceTile(z, x, y)
		if ok != wantOK || tl != want {
			t.Fatalf("ParseTile(%q, %q, %q) = %v, %v; want %v, %v", z, x, y, tl, ok, want, wantOK)
		}
		if !ok {
			return
		}
		if tl.Z < 0 || tl.Z > MaxZoom || tl.X < 0 || tl.Y < 0 || tl.X >= 1<<tl.Z || tl.Y >= 1<<tl.Z {
			t.Fatalf("ParseTile(%q, %q, %q) = %v, which does not exist", z, x, y, tl)
		}
		a, b, c, d := tl.Bounds(0.0156)
		if !(a < c && b < d && a >= -180 && c <= 180 && b >= -85.06 && d <= 85.06) {
			t.Fatalf("%v.Bounds = %v %v %v %v", tl, a, b, c, d)
		}
	})
}

// referenceTile is ParseTile written the slow, obvious way.
func referenceTile(z, x, y string) (Tile, bool) {
	var v [3]uint64
	for i, s := range []string{z, x, y} {
		if len(s) == 0 || len(s) > 10 || strings.Trim(s, "0123456789") != "" {
			return Tile{}, false
		}
		v[i], _ = strconv.ParseUint(s, 10, 64)
	}
	if v[0] > MaxZoom || v[1] >= 1<<v[0] || v[2] >= 1<<v[0] {
		return Tile{}, false
	}
	return Tile{int(v[0]), int(v[1]), int(v[2])}, true
}

func TestPrivate(t *testing.T) {
	tests := []struct{ in, want string }{
		{"public, max-age=60", "private, max-age=60"},
		{"max-age=60", "private, max-age=60"},
		{"", "private"},
		{"no-store", "no-store"},
		{"private, max-age=5", "private, max-age=5"},
	}
	for _, tt := range tests {
		if got := private(tt.in); got != tt.want {
			t.Errorf("private(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
