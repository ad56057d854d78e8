package auth

import (
	"encoding/json"
	"time"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
)

// Key is an API key as stored, without its secret.
type Key struct {
	// ID is the public key id, used in listings and as the limit identity.
	ID     string
	Notes  string
	Scopes []string
	Tier   string
	// Account names the client the key belongs to, "" for none: the
	// keys of one account share one fair share of the database.
	Account string
	// DBRole is the database role the key's requests run as on layers
	// that run as their caller, "" for none; DBClaims is a JSON object
	// of claims those layers' policies read, nil for none. Both are an
	// operator's to set.
	DBRole   string
	DBClaims json.RawMessage
	Spatial  *spatial.Scope
	// InvalidSpatial, when not nil, is the spatial scope stored for the
	// key that spatial.Parse refuses (Spatial is then nil); see
	// InvalidScope.
	InvalidSpatial *InvalidScope
	CreatedAt      time.Time
	ExpiresAt      *time.Time
	RevokedAt      *time.Time
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
	// claims is keyClaims of the key as read, made once per read rather
	// than per request; "" for a key without a database role.
	claims string
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
	if s := k.InvalidSpatial; s != nil {
		return apperr.Wrap(apperr.Forbidden, "This API key's spatial scope is invalid as stored ("+s.Reason+
			"), so the key is refused until an operator replaces the scope (PATCH /admin/keys/"+k.ID+").", ErrStoredScopeInvalid)
	}
	return nil
}

// InvalidScope is a key's stored spatial scope that spatial.Parse refuses:
// one written before scopes were checked as they are now, or by hand in
// SQL. Reading the key does not fail on it (listing keys, and every other
// key, keep working), but the key is refused with a 403 naming the fault:
// serving it as the whole world would widen it, and guessing a repair
// could too. An operator sees it in the admin API and replaces it there.
type InvalidScope struct {
	Raw    json.RawMessage // as stored
	Reason string          // what is wrong with it, safe to show
}

// ErrStoredScopeInvalid is in the chain of Usable's refusal of a key whose
// stored spatial scope is invalid.
var ErrStoredScopeInvalid = apperr.New(apperr.Forbidden, "The API key's spatial scope is invalid as stored.")

// SpatialJSON is the key's spatial scope as JSON: its canonical form, the
// stored form when it is invalid, or nil for the whole world.
func (k Key) SpatialJSON() json.RawMessage {
	if k.InvalidSpatial != nil {
		return k.InvalidSpatial.Raw
	}
	if k.Spatial == nil {
		return nil
	}
	raw, _ := k.Spatial.MarshalJSON()
	return raw
}
