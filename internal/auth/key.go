package auth

import (
	"time"

	"github.com/geogate/geogate/internal/spatial"
)

// Key is an API key as stored, without its secret.
type Key struct {
	// ID is the public key id, used in listings and as the limit identity.
	ID        string
	Notes     string
	Scopes    []string
	Tier      string
	Spatial   *spatial.Scope
	CreatedAt time.Time
	ExpiresAt *time.Time
	RevokedAt *time.Time
	// Layers are the layer ids and patterns the key may read; nil means
	// every layer.
	Layers []string
}

// Usable reports why k cannot be used at t, or nil.
func (k Key) Usable(t time.Time) error {
	if k.RevokedAt != nil && !k.RevokedAt.After(t) {
		return errInvalidKey
	}
	if k.ExpiresAt != nil && !k.ExpiresAt.After(t) {
		return errExpiredKey
	}
	return nil
}
