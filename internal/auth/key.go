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
	// Overrides are, per rate-limit policy, the windows this key should
	// get instead of the policy's ("10/1s,600/1m", ratelimit.ParseWindows'
	// syntax); nil means none. Every replica applies them
	// (internal/limits).
	Overrides map[string]string
	// PreviousSecretUntil, after a rotation, is when the secret it
	// replaced stops working; nil when there is no such secret.
	PreviousSecretUntil *time.Time

	// viaPrevious says the key was found by the secret a rotation
	// replaced (ByHash), which works only until PreviousSecretUntil.
	viaPrevious bool
}

// Usable reports why k cannot be used at t, or nil.
func (k Key) Usable(t time.Time) error {
	if k.RevokedAt != nil && !k.RevokedAt.After(t) {
		return errInvalidKey
	}
	if k.ExpiresAt != nil && !k.ExpiresAt.After(t) {
		return errExpiredKey
	}
	if k.viaPrevious && (k.PreviousSecretUntil == nil || !k.PreviousSecretUntil.After(t)) {
		return errRotatedKey
	}
	return nil
}
