// Package admin administers API keys: creating, listing, changing,
// rotating and revoking them, each change recorded in the admin_audit
// table in the transaction that makes it. The HTTP routes under /admin/
// and the api keys command are both built on its Service.
package admin

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/ratelimit"
	"github.com/geogate/geogate/internal/spatial"
)

// Actor is who asks for an administrative action, and from where.
type Actor struct {
	// Kind is an identity kind (auth.KindKey, KindSub, KindIP) or KindCLI.
	Kind string
	// ID is the key id, the subject or the address; for the CLI the
	// operating-system user.
	ID string
	// Client is the client address of an HTTP request, "" for the CLI.
	Client string
}

// KindCLI is the actor kind of the api keys command.
const KindCLI = "cli"

// Audited actions.
const (
	ActionCreate  = "create"
	ActionReplace = "replace" // api keys create --replace over an existing key
	ActionUpdate  = "update"
	ActionRevoke  = "revoke"
	ActionRotate  = "rotate"
)

// Rotation grace periods.
const (
	DefaultGrace = 24 * time.Hour
	MaxGrace     = 7 * 24 * time.Hour
)

// Bounds of what a key may hold.
const (
	maxNotes     = 1000 // characters
	maxOverrides = 32
)

var (
	tierRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)
	policyRe = regexp.MustCompile(`^[a-z][a-z0-9-]{0,39}$`)
)

// Service administers the keys of one database.
type Service struct {
	db       *pgxpool.Pool
	policies func() []string
	onChange func(id string)
	check    func(policy string, ws []ratelimit.Window) error
	now      func() time.Time
}

// Options configure a Service.
type Options struct {
	// Policies lists the rate-limit policies overrides may name (those in
	// force, which a reload may add to); nil accepts any well-formed name.
	Policies func() []string
	// OnChange, if set, is called with a key's id once a change to it has
	// committed (this process's key cache forgets it at once, before the
	// notification every replica hears arrives).
	OnChange func(id string)
	// CheckWindows, if set, says whether policy can run with ws in place
	// of its windows (its algorithm bounds the limits it allows).
	CheckWindows func(policy string, ws []ratelimit.Window) error
}

// New returns a Service on db.
func New(db *pgxpool.Pool, o Options) *Service {
	onChange := o.OnChange
	if onChange == nil {
		onChange = func(string) {}
	}
	return &Service{db: db, policies: o.Policies, onChange: onChange, check: o.CheckWindows, now: time.Now}
}

// Opt is a field of a Change: Set says the change sets it to V.
type Opt[T any] struct {
	Set bool
	V   T
}

// Some returns an Opt setting v.
func Some[T any](v T) Opt[T] { return Opt[T]{Set: true, V: v} }

// Change is what an update sets; fields not Set stay as they are. The id,
// the secrets and the created and revoked times cannot change.
type Change struct {
	Notes     Opt[string]
	Scopes    Opt[[]string]
	Tier      Opt[string] // "" is no tier
	Account   Opt[string] // "" is no account
	DBRole    Opt[string] // "" is no role
	DBClaims  Opt[json.RawMessage]
	Spatial   Opt[*spatial.Scope]
	ExpiresAt Opt[*time.Time]
	Layers    Opt[[]string]
	Overrides Opt[map[string]string]
}

// List returns every key by id.
func (s *Service) List(ctx context.Context) ([]auth.Key, error) {
	return auth.NewStore(s.db).List(ctx)
}

// Get returns key id, or an error of kind NotFound.
func (s *Service) Get(ctx context.Context, id string) (auth.Key, error) {
	return auth.NewStore(s.db).Get(ctx, id)
}

// Create stores the key o describes (o.Secret and o.Replace are for the
// CLI) and returns it with its secret, shown only now.
func (s *Service) Create(ctx context.Context, a Actor, o auth.CreateOptions) (auth.Key, string, error) {
	if err := s.validateNew(o.Key); err != nil {
		return auth.Key{}, "", err
	}
	o.Overrides = normalOverrides(o.Overrides)
	var (
		k      auth.Key
		secret string
	)
	err := s.write(ctx, o.ID, func(tx pgx.Tx, st *auth.Store) error {
		action := ActionCreate
		if o.Replace {
			if _, err := st.GetForUpdate(ctx, o.ID); err == nil {
				action = ActionReplace
			}
		}
		var err error
		if secret, err = st.Create(ctx, o); err != nil {
			return err
		}
		if k, err = st.Get(ctx, o.ID); err != nil {
			return err
		}
		return record(ctx, tx, a, action, k.ID, keyFields(k))
	})
	if err != nil {
		return auth.Key{}, "", err
	}
	return k, secret, nil
}

// Update applies ch to key id and returns the key as stored. Only the
// fields that ch changes are recorded.
func (s *Service) Update(ctx context.Context, a Actor, id string, ch Change) (auth.Key, error) {
	if err := s.validateChange(ch); err != nil {
		return auth.Key{}, err
	}
	var k auth.Key
	err := s.write(ctx, id, func(tx pgx.Tx, st *auth.Store) error {
		old, err := st.GetForUpdate(ctx, id)
		if err != nil {
			return err
		}
		k = apply(old, ch)
		if err := st.Update(ctx, k); err != nil {
			return err
		}
		if k, err = st.Get(ctx, id); err != nil {
			return err
		}
		return record(ctx, tx, a, ActionUpdate, id, diff(old, k))
	})
	if err != nil {
		return auth.Key{}, err
	}
	return k, nil
}

// Revoke revokes key id, which stops working on every replica, and
// returns it. Revoking it again keeps the first revocation time.
func (s *Service) Revoke(ctx context.Context, a Actor, id string) (auth.Key, error) {
	var k auth.Key
	err := s.write(ctx, id, func(tx pgx.Tx, st *auth.Store) error {
		old, err := st.GetForUpdate(ctx, id)
		if err != nil {
			return err
		}
		if err := st.Revoke(ctx, id); err != nil {
			return err
		}
		if k, err = st.Get(ctx, id); err != nil {
			return err
		}
		return record(ctx, tx, a, ActionRevoke, id, diff(old, k))
	})
	if err != nil {
		return auth.Key{}, err
	}
	return k, nil
}

// Rotate gives key id a new secret, returned with the key; the secret it
// had keeps working for grace (0 to MaxGrace).
func (s *Service) Rotate(ctx context.Context, a Actor, id string, grace time.Duration) (auth.Key, string, error) {
	if grace < 0 || grace > MaxGrace {
		return auth.Key{}, "", apperr.InvalidField(fmt.Sprintf("Must be from 0s to %s.", formatDuration(MaxGrace)), "value_error", "body", "grace")
	}
	var (
		k      auth.Key
		secret string
	)
	err := s.write(ctx, id, func(tx pgx.Tx, st *auth.Store) error {
		var err error
		if secret, err = st.Rotate(ctx, id, grace); err != nil {
			return err
		}
		if k, err = st.Get(ctx, id); err != nil {
			return err
		}
		return record(ctx, tx, a, ActionRotate, id, map[string]any{
			"grace": formatDuration(grace), "previous_secret_until": k.PreviousSecretUntil,
		})
	})
	if err != nil {
		return auth.Key{}, "", err
	}
	return k, secret, nil
}

// write runs f in a transaction with a Store on it and, once it has
// committed, tells OnChange about key id.
func (s *Service) write(ctx context.Context, id string, f func(pgx.Tx, *auth.Store) error) error {
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error { return f(tx, auth.NewStoreOn(tx)) })
	if err != nil {
		return err
	}
	s.onChange(id)
	return nil
}

// validateNew checks a key to create.
func (s *Service) validateNew(k auth.Key) error {
	errs := &apperr.ValidationError{}
	if !auth.ValidKeyID(k.ID) {
		errs.Add(apperr.MessageOf(auth.ErrBadKeyID), "string_pattern_mismatch", "body", "id")
	}
	s.validate(errs, Change{
		Notes: Some(k.Notes), Scopes: Some(k.Scopes), Tier: Some(k.Tier), Account: Some(k.Account), DBRole: Some(k.DBRole), DBClaims: Some(k.DBClaims), ExpiresAt: Some(k.ExpiresAt),
		Layers: Some(k.Layers), Overrides: Some(k.Overrides),
	})
	return errs.Err()
}

func (s *Service) validateChange(ch Change) error {
	errs := &apperr.ValidationError{}
	s.validate(errs, ch)
	return errs.Err()
}

// validate adds to errs what is wrong with the fields ch sets.
func (s *Service) validate(errs *apperr.ValidationError, ch Change) {
	if ch.Notes.Set {
		switch n := ch.Notes.V; {
		case utf8.RuneCountInString(n) > maxNotes:
			errs.Add(fmt.Sprintf("At most %d characters.", maxNotes), "string_too_long", "body", "notes")
		case strings.ContainsRune(n, 0) || !utf8.ValidString(n):
			errs.Add("Must be UTF-8 text without NUL characters.", "value_error", "body", "notes")
		}
	}
	if ch.Scopes.Set {
		if len(ch.Scopes.V) == 0 {
			errs.Add("At least one scope.", "too_short", "body", "scopes")
		}
		for i, sc := range ch.Scopes.V {
			switch {
			case !slices.Contains(auth.AllScopes, sc):
				errs.Add(fmt.Sprintf("Unknown scope; known: %s.", strings.Join(auth.AllScopes, ", ")), "enum", "body", "scopes", i)
			case slices.Index(ch.Scopes.V, sc) < i:
				errs.Add("Named twice.", "value_error", "body", "scopes", i)
			}
		}
	}
	if ch.Tier.Set && ch.Tier.V != "" && !tierRe.MatchString(ch.Tier.V) {
		errs.Add("A tier is 1 to 64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit.", "string_pattern_mismatch", "body", "tier")
	}
	if ch.Account.Set && ch.Account.V != "" && !auth.ValidAccount(ch.Account.V) {
		errs.Add("An account is 1 to 64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit.", "string_pattern_mismatch", "body", "account")
	}
	if ch.DBRole.Set && ch.DBRole.V != "" && !auth.ValidRole(ch.DBRole.V) {
		errs.Add("A database role is 1 to 63 lower-case letters, digits and _, starting with a letter or _.", "string_pattern_mismatch", "body", "db_role")
	}
	if ch.DBClaims.Set && ch.DBClaims.V != nil {
		if err := auth.CheckKeyClaims(ch.DBClaims.V); err != nil {
			errs.Add("The key's claims: "+err.Error()+", or null for none.", "value_error", "body", "claims")
		}
	}
	if ch.ExpiresAt.Set && ch.ExpiresAt.V != nil && !ch.ExpiresAt.V.After(s.now()) {
		errs.Add("Must be in the future; revoke a key to stop it now.", "value_error", "body", "expires_at")
	}
	if ch.Layers.Set {
		if err := auth.ValidateLayers(ch.Layers.V); err != nil {
			errs.Add(apperr.MessageOf(err), "value_error", "body", "layers")
		}
	}
	if ch.Overrides.Set {
		s.validateOverrides(errs, ch.Overrides.V)
	}
}

// validateOverrides adds to errs what is wrong with per-policy window
// lists, of a key or of a tier.
func (s *Service) validateOverrides(errs *apperr.ValidationError, o map[string]string) {
	if len(o) > maxOverrides {
		errs.Add(fmt.Sprintf("At most %d policies.", maxOverrides), "too_long", "body", "overrides")
	}
	var known []string
	if s.policies != nil {
		known = s.policies()
	}
	for _, p := range slices.Sorted(maps.Keys(o)) {
		switch {
		case known != nil && !slices.Contains(known, p):
			errs.Add(fmt.Sprintf("Unknown rate-limit policy; known: %s.", strings.Join(known, ", ")), "value_error", "body", "overrides", p)
		case known == nil && !policyRe.MatchString(p):
			errs.Add("A policy name is 1 to 40 lowercase letters, digits or '-', starting with a letter.", "value_error", "body", "overrides", p)
		default:
			ws, err := ratelimit.ParseWindows(o[p])
			if err == nil && s.check != nil {
				err = s.check(p, ws)
			}
			if err != nil {
				errs.Add("Windows such as 10/1s,600/1m: "+err.Error()+".", "value_error", "body", "overrides", p)
			}
		}
	}
}

// normalOverrides keeps each policy's windows in ParseWindows' canonical
// form, and stores no overrides as nil.
func normalOverrides(o map[string]string) map[string]string {
	if len(o) == 0 {
		return nil
	}
	out := make(map[string]string, len(o))
	for p, v := range o {
		ws, err := ratelimit.ParseWindows(v)
		if err != nil {
			out[p] = v // validated before; kept as given
			continue
		}
		parts := make([]string, len(ws))
		for i, w := range ws {
			parts[i] = w.String()
		}
		out[p] = strings.Join(parts, ",")
	}
	return out
}

// apply returns k with ch applied.
func apply(k auth.Key, ch Change) auth.Key {
	if ch.Notes.Set {
		k.Notes = ch.Notes.V
	}
	if ch.Scopes.Set {
		k.Scopes = ch.Scopes.V
	}
	if ch.Tier.Set {
		k.Tier = ch.Tier.V
	}
	if ch.Account.Set {
		k.Account = ch.Account.V
	}
	if ch.DBRole.Set {
		k.DBRole = ch.DBRole.V
	}
	if ch.DBClaims.Set {
		k.DBClaims = ch.DBClaims.V
	}
	if ch.Spatial.Set {
		k.Spatial, k.InvalidSpatial = ch.Spatial.V, nil
	}
	if ch.ExpiresAt.Set {
		k.ExpiresAt = ch.ExpiresAt.V
	}
	if ch.Layers.Set {
		k.Layers = ch.Layers.V
	}
	if ch.Overrides.Set {
		k.Overrides = normalOverrides(ch.Overrides.V)
	}
	return k
}

// keyFields are the fields of k an audit entry records, by their names in
// the HTTP API; never a secret.
func keyFields(k auth.Key) map[string]any {
	return map[string]any{
		"notes":         k.Notes,
		"scopes":        k.Scopes,
		"tier":          nullable(k.Tier),
		"account":       nullable(k.Account),
		"db_role":       nullable(k.DBRole),
		"claims":        k.DBClaims,
		"spatial_scope": spatialField(k),
		"expires_at":    k.ExpiresAt,
		"layers":        k.Layers,
		"overrides":     k.Overrides,
		"revoked_at":    k.RevokedAt,
	}
}

// diff is, for each field that differs between old and k, {"from": ...,
// "to": ...}.
func diff(old, k auth.Key) map[string]any {
	from, to := keyFields(old), keyFields(k)
	out := map[string]any{}
	for name, v := range to {
		a, _ := json.Marshal(from[name])
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			out[name] = map[string]any{"from": from[name], "to": v}
		}
	}
	return out
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// maxSpatialInAudit bounds the spatial scope an audit entry copies; a
// larger one is recorded by its hash and bounds.
const maxSpatialInAudit = 1024

func spatialField(k auth.Key) any {
	raw := k.SpatialJSON()
	switch {
	case raw == nil:
		return nil
	case len(raw) <= maxSpatialInAudit:
		return raw
	case k.Spatial == nil: // invalid as stored: no bounds to give
		sum := sha256.Sum256(raw)
		return map[string]any{"sha256": hex.EncodeToString(sum[:]), "invalid": true}
	}
	return map[string]any{"hash": k.Spatial.Hash(), "bounds": k.Spatial.Bounds()}
}

// formatDuration writes d as Go does, without the zero units that
// time.Duration.String leaves behind ("24h", not "24h0m0s").
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}
