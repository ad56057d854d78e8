package features

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"

	"github.com/geogate/geogate/internal/apperr"
)

// cursors sign the position a next link resumes at, bound to the query
// it belongs to, so that a link cannot be edited into another query or an
// arbitrary value.
type cursors struct{ key []byte }

func newCursors(key string) *cursors {
	k := []byte(key)
	if len(k) == 0 {
		k = make([]byte, 32)
		_, _ = rand.Read(k)
	}
	return &cursors{key: k}
}

// page is what a cursor carries: where the last page ended and how many
// features the first page counted.
type page struct {
	Sort    []*string `json:"s,omitempty"`
	Key     string    `json:"k"`
	Matched int64     `json:"m"`
}

// maxCursor bounds a cursor's size, so that a next link stays a URL
// clients take; a page ending on a longer key or sort value gets none.
const maxCursor = 4096

var errBadCursor = apperr.New(apperr.BadRequest, "cursor: this next link was not issued for this query, or was altered; start again from the first page.")

func (c *cursors) mac(query string, payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte(query))
	m.Write([]byte{0})
	m.Write(payload)
	return m.Sum(nil)[:16]
}

// encode returns p's cursor within query, "" when it would be too long.
func (c *cursors) encode(query string, p page) string {
	payload, _ := json.Marshal(p)
	out := base64.RawURLEncoding.EncodeToString(append(payload, c.mac(query, payload)...))
	if len(out) > maxCursor {
		return ""
	}
	return out
}

func (c *cursors) decode(query, s string) (page, error) {
	if len(s) > maxCursor {
		return page{}, errBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(raw) < 16 {
		return page{}, errBadCursor
	}
	payload, sum := raw[:len(raw)-16], raw[len(raw)-16:]
	if !hmac.Equal(sum, c.mac(query, payload)) {
		return page{}, errBadCursor
	}
	var p page
	if err := json.Unmarshal(payload, &p); err != nil {
		return page{}, errBadCursor
	}
	return p, nil
}
