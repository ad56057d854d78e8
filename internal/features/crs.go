package features

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/geogate/geogate/internal/apperr"
)

// CRS is a coordinate reference system a request may name: its EPSG code
// and whether its axes come latitude (northing) first. CRS84 and EPSG:4326
// are the same datum with the axes swapped.
type CRS struct {
	SRID     int
	LatFirst bool
	URI      string
}

// The URIs OGC API names CRSs by.
const (
	crs84URI   = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
	epsgPrefix = "http://www.opengis.net/def/crs/EPSG/0/"
)

// CRS84 is the default CRS of every request and answer.
var CRS84 = CRS{SRID: 4326, URI: crs84URI}

// localCRS is the CRS of a layer in SRID 0: its coordinates as stored,
// with no place on the Earth and no URI to name it by. An answer in it
// carries no Content-Crs.
var localCRS = CRS{SRID: 0}

func epsg(srid int) CRS {
	return CRS{SRID: srid, LatFirst: srid == 4326, URI: epsgPrefix + strconv.Itoa(srid)}
}

// crsList is what a layer offers: CRS84, EPSG:4326, Web Mercator and its
// storage CRS.
func crsList(storage int) []CRS {
	if storage <= 0 {
		return nil
	}
	list := []CRS{CRS84, epsg(4326), epsg(3857)}
	if storage != 4326 && storage != 3857 && storage > 0 {
		list = append(list, epsg(storage))
	}
	return list
}

func crsURIs(storage int) []string {
	out := []string{}
	for _, c := range crsList(storage) {
		out = append(out, c.URI)
	}
	return out
}

// storageCRS is the CRS a layer's column is stored in; a layer in
// longitude/latitude reports CRS84, the order it stores.
func storageCRS(srid int) CRS {
	if srid == 4326 {
		return CRS84
	}
	if srid <= 0 {
		return localCRS
	}
	return epsg(srid)
}

// parseCRS reads the value of parameter param: a URI, in brackets or not
// (the safe-CURIE form [EPSG:3857] too), of a CRS the layer offers.
func parseCRS(param, v string, storage int) (CRS, error) {
	s := strings.TrimSpace(v)
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = s[1 : len(s)-1]
	}
	switch {
	case strings.EqualFold(s, "OGC:CRS84"):
		s = crs84URI
	case len(s) > 5 && strings.EqualFold(s[:5], "EPSG:"):
		s = epsgPrefix + s[5:]
	case strings.HasPrefix(s, "https://"):
		s = "http://" + s[len("https://"):]
	}
	for _, c := range crsList(storage) {
		if s == c.URI {
			return c, nil
		}
	}
	if storage <= 0 {
		return CRS{}, errNoCRS(param)
	}
	return CRS{}, apperr.Errorf(apperr.BadRequest, "%s: %q is not a CRS this collection offers; its crs list names them (%s).",
		param, v, strings.Join(crsURIs(storage), ", "))
}

// errNoCRS refuses parameter param on a layer in SRID 0, whose
// coordinates no CRS can be compared with or transformed to.
func errNoCRS(param string) error {
	return apperr.Errorf(apperr.BadRequest, "%s: this collection is stored in SRID 0, with no coordinate reference system: its coordinates are served as they are, and cannot be transformed or compared with a box or a scope.", param)
}

// contentCRS is the Content-Crs header value of c.
func contentCRS(c CRS) string { return fmt.Sprintf("<%s>", c.URI) }
