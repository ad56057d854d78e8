package auth

import (
	"context"
	"fmt"
	"path"

	"github.com/geogate/geogate/internal/apperr"
)

// A key's or a token's layers are layer ids (see catalog.LayerID) or
// shell patterns over them, matched with path.Match: "roads" is one layer,
// "transit__*" every layer of schema transit, published now or later.
// Patterns are allowed because layers come and go with the user's
// database, and a key meant for one schema should not have to be
// reissued when a table is added to it. A layer id holds none of the
// pattern characters, so an exact id never matches more than itself.
const (
	// MaxLayers bounds the entries of a key's or a token's layers.
	MaxLayers = 64
	// MaxLayerPattern bounds the length of one entry: a generated layer id
	// (schema__table__column-abcdef, each name at most 63 bytes) is shorter.
	MaxLayerPattern = 256
)

// ErrLayerForbidden is the refusal CheckLayer returns when the caller may
// not read a layer; the error CheckLayer returns names the layer asked for,
// and errors.Is finds this one in it.
var ErrLayerForbidden = apperr.New(apperr.Forbidden, "Your credentials may not read this layer.")

// MayRead reports whether the identity may read layer: always when its
// Layers are nil, otherwise when an entry matches. It answers only this
// question; the route's scope is Require's to check. A listing of layers
// (GET /layers, say) can leave out those a caller may not read with it.
func (id Identity) MayRead(layer string) bool {
	if id.Layers == nil {
		return true
	}
	for _, p := range id.Layers {
		// Entries were checked when the key was stored or the token read;
		// one that is malformed all the same matches nothing.
		if ok, err := path.Match(p, layer); ok && err == nil {
			return true
		}
	}
	return false
}

// CheckLayer returns nil when the identity in ctx may read layer, and a
// Forbidden error wrapping ErrLayerForbidden when it may not; its detail
// names the layer asked for and no other. Call it before looking the layer
// up: a caller limited to some layers then gets the same answer for a
// layer it may not read whether that layer exists or not, and cannot probe
// for the names of the others.
func CheckLayer(ctx context.Context, layer string) error { return checkLayer(ctx, layer, "read") }

// CheckLayerWrite is CheckLayer for a request that changes layer: the
// same layers are allowed, and a refusal says "write".
func CheckLayerWrite(ctx context.Context, layer string) error { return checkLayer(ctx, layer, "write") }

func checkLayer(ctx context.Context, layer, verb string) error {
	if FromContext(ctx).MayRead(layer) {
		return nil
	}
	return RefuseLayer(layer, verb)
}

// RefuseLayer is the one answer to a caller refused layer, whatever
// refused it (its key's or token's list of layers, the layer file's
// scopes) and whether the layer exists: a 403 wrapping
// ErrLayerForbidden that names the layer asked for and what was asked
// (verb: read or write), and nothing of why, so that a caller cannot
// tell which layers are protected, or by what.
func RefuseLayer(layer, verb string) error {
	// The layer comes from the request: it is quoted only when it could
	// be an id, so the detail never carries arbitrary bytes back.
	what := "that layer"
	if layer != "" && len(layer) <= MaxLayerPattern && layerChars(layer, false) {
		what = fmt.Sprintf("layer %q", layer)
	}
	return apperr.Wrap(apperr.Forbidden, fmt.Sprintf("These credentials may not %s %s.", verb, what), ErrLayerForbidden)
}

// ValidateLayers returns nil when layers may be a key's or a token's: nil
// (every layer), or 1 to MaxLayers distinct layer ids or patterns; and an
// Invalid error naming the entry at fault otherwise.
func ValidateLayers(layers []string) error {
	problem, at := checkLayers(layers)
	switch {
	case problem == "":
		return nil
	case at >= 0:
		problem = fmt.Sprintf("entry %d (%q) %s", at+1, layers[at], problem)
	}
	return apperr.New(apperr.Invalid, "The layers are not valid: "+problem+".")
}

// checkLayers says what is wrong with layers, a key's or a token's list,
// or "" when nothing is. A problem of one entry says what it is, for the
// caller to name the entry (at) or not; a problem of the whole list (at
// -1) is a phrase of its own. nil is every layer; an empty list is refused
// rather than taken for "none", since an issuer that sends one more likely
// meant "all".
func checkLayers(layers []string) (problem string, at int) {
	if layers == nil {
		return "", -1
	}
	if len(layers) == 0 {
		return "the list is empty; leave it out to allow every layer", -1
	}
	if len(layers) > MaxLayers {
		return fmt.Sprintf("the list has more than %d entries", MaxLayers), -1
	}
	seen := make(map[string]bool, len(layers))
	for i, l := range layers {
		switch {
		case l == "":
			return "is empty", i
		case len(l) > MaxLayerPattern:
			return fmt.Sprintf("is longer than %d characters", MaxLayerPattern), i
		case !validLayerPattern(l):
			return "is not a layer id or pattern (letters, digits, '_', '-' and the wildcards *, ? and [...])", i
		case seen[l]:
			return "appears twice", i
		}
		seen[l] = true
	}
	return "", -1
}

// validLayerPattern reports whether p holds only what a layer id holds
// plus the wildcards of path.Match, and is a well-formed pattern. The
// escape '\' and the separator '/' are left out: no layer id needs them.
func validLayerPattern(p string) bool {
	if !layerChars(p, true) {
		return false
	}
	_, err := path.Match(p, "")
	return err == nil
}

// layerChars reports whether s holds only letters, digits, '_' and '-'
// (what catalog.LayerID puts in an id), and, with wildcards, the
// characters of path.Match's wildcards and classes.
func layerChars(s string, wildcards bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		case wildcards && (c == '*' || c == '?' || c == '[' || c == ']' || c == '^'):
		default:
			return false
		}
	}
	return true
}
