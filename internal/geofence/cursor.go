package geofence

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
)

// Position is a place in a keyset-ordered result: the last row a page
// returned. /within orders by (Dist, Key), the geofence listing by ID.
type Position struct {
	Dist float64
	ID   int64
	// Key is a feature id as PostgreSQL writes it.
	Key string
}

// maxCursorKey bounds the feature id a cursor carries, so that a next link
// stays a URL clients take: a page ending on a longer id has none (see
// Within; docs/api/layers.md says so).
const maxCursorKey = 2048

// ErrBadCursor is returned for a cursor that was not issued by this service
// for the same query, was altered, or was signed with another key.
var ErrBadCursor = errors.New("invalid cursor")

// Cursors turns positions into opaque, signed strings and back. A cursor is
// bound to the query that produced it: a cursor from one query is rejected
// by another.
type Cursors struct {
	key []byte
}

// NewCursors returns a codec signing with key, or with a random key when
// key is empty (cursors then do not survive a restart).
func NewCursors(key string) *Cursors {
	k := []byte(key)
	if len(k) == 0 {
		k = make([]byte, 32)
		_, _ = rand.Read(k)
	}
	return &Cursors{key: k}
}

const (
	cursorPayload = 8 + 8 + 8 // query hash, distance bits, id; then the key
	cursorMAC     = 16
)

// Encode returns the cursor for p within the query identified by scope.
func (cs *Cursors) Encode(scope string, p Position) string {
	b := make([]byte, cursorPayload, cursorPayload+len(p.Key)+cursorMAC)
	copy(b[:8], scopeHash(scope))
	binary.BigEndian.PutUint64(b[8:16], math.Float64bits(p.Dist))
	binary.BigEndian.PutUint64(b[16:24], uint64(p.ID))
	b = append(b, p.Key...)
	b = append(b, cs.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the position in s, or ErrBadCursor.
func (cs *Cursors) Decode(scope, s string) (Position, error) {
	if len(s) > base64.RawURLEncoding.EncodedLen(cursorPayload+maxCursorKey+cursorMAC) {
		return Position{}, ErrBadCursor
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < cursorPayload+cursorMAC {
		return Position{}, ErrBadCursor
	}
	payload, mac := b[:len(b)-cursorMAC], b[len(b)-cursorMAC:]
	if !hmac.Equal(mac, cs.mac(payload)) || !hmac.Equal(payload[:8], scopeHash(scope)) {
		return Position{}, ErrBadCursor
	}
	p := Position{
		Dist: math.Float64frombits(binary.BigEndian.Uint64(payload[8:16])),
		ID:   int64(binary.BigEndian.Uint64(payload[16:24])),
		Key:  string(payload[cursorPayload:]),
	}
	if math.IsNaN(p.Dist) || math.IsInf(p.Dist, 0) || p.Dist < 0 || p.ID < 0 {
		return Position{}, ErrBadCursor
	}
	return p, nil
}

func (cs *Cursors) mac(payload []byte) []byte {
	h := hmac.New(sha256.New, cs.key)
	h.Write(payload)
	return h.Sum(nil)[:cursorMAC]
}

func scopeHash(scope string) []byte {
	h := sha256.Sum256([]byte(scope))
	return h[:8]
}
