package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
)

// Store keeps API keys in PostgreSQL (table api_keys, migrations 00002,
// 00010 and 00012).
type Store struct {
	db Querier
}

// Querier runs statements: a pool, a connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// NewStoreOn returns a Store whose statements run on q, for example a
// transaction that also records what it changed.
func NewStoreOn(q Querier) *Store { return &Store{db: q} }

var keyIDRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Store errors.
var (
	ErrKeyNotFound = apperr.New(apperr.NotFound, "No API key has that id.")
	ErrKeyExists   = apperr.New(apperr.Conflict, "An API key with that id already exists.")
	ErrSecretInUse = apperr.New(apperr.Conflict, "Another API key already has that secret.")
)

// HashSecret returns the lookup hash of an API key secret. Generated
// secrets carry 256 random bits, so a fast hash is enough: nothing can be
// guessed from it, and every request can afford it.
func HashSecret(secret string) [32]byte { return sha256.Sum256([]byte(secret)) }

// NewSecret returns a fresh secret for key id: gg_<id>_<43 random
// characters>. The id inside is for people reading it; lookups only use the
// hash, so any secret works.
func NewSecret(id string) string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "gg_" + id + "_" + base64.RawURLEncoding.EncodeToString(b[:])
}

// CreateOptions describe a key to create.
type CreateOptions struct {
	Key
	// Secret is the secret to store; empty generates one.
	Secret string
	// Replace updates an existing key with the same id (its secret, scopes,
	// tier, spatial scope, layers, overrides, expiry and notes; a revoked
	// key is restored, and a rotated-away secret stops working).
	Replace bool
}

// ErrBadKeyID is the refusal of a key id that no key could have.
var ErrBadKeyID = apperr.New(apperr.Invalid, "A key id is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit.")

// ValidAccount reports whether a is a well-formed account name: 1 to 64
// letters, digits, '_', '.', ':' or '-', beginning with a letter or digit
// (the column's check, migration 00025).
func ValidAccount(a string) bool { return accountRe.MatchString(a) }

var accountRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$`)

// ValidKeyID reports whether id is a well-formed key id.
func ValidKeyID(id string) bool { return keyIDRe.MatchString(id) }

// Create stores a key and returns the secret, which is never stored nor
// shown again.
func (s *Store) Create(ctx context.Context, o CreateOptions) (string, error) {
	if !keyIDRe.MatchString(o.ID) {
		return "", ErrBadKeyID
	}
	if o.Secret == "" {
		o.Secret = NewSecret(o.ID)
	}
	if err := checkKeyHeader(o.Secret); err != nil {
		return "", apperr.New(apperr.Invalid, "A secret is 1 to 256 printable ASCII characters without spaces.")
	}
	if err := ValidateLayers(o.Layers); err != nil {
		return "", err
	}
	h := HashSecret(o.Secret)
	q := insertKeySQL
	if o.Replace {
		q = upsertKeySQL
	}
	_, err := s.db.Exec(ctx, q, append([]any{o.ID, h[:]}, keyArgs(o.Key)...)...)
	if err := writeError(err); err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	return o.Secret, nil
}

// keyArgs are the arguments of the statements that write a key that
// follow its id (and secret): notes, scopes, tier, geo_scope, expires_at,
// layers, overrides, account, db_role, db_claims.
func keyArgs(k Key) []any {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	var tier *string
	if k.Tier != "" {
		tier = &k.Tier
	}
	// An invalid stored scope is written back as it was (see
	// InvalidScope): dropping it would give the key the whole world.
	geo := []byte(k.SpatialJSON())
	var overrides []byte
	if k.Overrides != nil {
		overrides, _ = json.Marshal(k.Overrides)
	}
	var account *string
	if k.Account != "" {
		account = &k.Account
	}
	// A nil k.Layers is NULL, every layer.
	var role *string
	if k.DBRole != "" {
		role = &k.DBRole
	}
	var claims []byte
	if len(k.DBClaims) > 0 {
		claims = k.DBClaims
	}
	return []any{k.Notes, scopes, tier, geo, k.ExpiresAt, k.Layers, overrides, account, role, claims}
}

// writeError names the unique constraints a write can break.
func writeError(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		if pe.ConstraintName == "api_keys_pkey" {
			return ErrKeyExists
		}
		return ErrSecretInUse
	}
	return err
}

const insertKeySQL = `
INSERT INTO api_keys (id, secret_hash, notes, scopes, tier, geo_scope, expires_at, layers, overrides, account, db_role, db_claims)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`

const upsertKeySQL = insertKeySQL + `
ON CONFLICT (id) DO UPDATE SET
    secret_hash = EXCLUDED.secret_hash, notes = EXCLUDED.notes, scopes = EXCLUDED.scopes,
    tier = EXCLUDED.tier, geo_scope = EXCLUDED.geo_scope, expires_at = EXCLUDED.expires_at,
    layers = EXCLUDED.layers, overrides = EXCLUDED.overrides, account = EXCLUDED.account,
    db_role = EXCLUDED.db_role, db_claims = EXCLUDED.db_claims, revoked_at = NULL,
    previous_secret_hash = NULL, previous_secret_until = NULL`

const keyColumns = `id, notes, scopes, tier, geo_scope, created_at, expires_at, revoked_at, layers, overrides, previous_secret_until, account, db_role, db_claims`

// List returns every key, revoked and expired ones included, by id.
func (s *Store) List(ctx context.Context) ([]Key, error) {
	rows, err := s.db.Query(ctx, `SELECT `+keyColumns+` FROM api_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, scanKey)
	if err != nil {
		return nil, fmt.Errorf("list API keys: %w", err)
	}
	return keys, nil
}

// Get returns key id, or ErrKeyNotFound.
func (s *Store) Get(ctx context.Context, id string) (Key, error) {
	return s.get(ctx, id, "")
}

// GetForUpdate is Get that also locks the key's row until the end of the
// Store's transaction, so that a change computed from it is not lost to a
// concurrent one.
func (s *Store) GetForUpdate(ctx context.Context, id string) (Key, error) {
	return s.get(ctx, id, " FOR UPDATE")
}

func (s *Store) get(ctx context.Context, id, lock string) (Key, error) {
	if !keyIDRe.MatchString(id) {
		return Key{}, ErrKeyNotFound
	}
	rows, err := s.db.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = $1`+lock, id)
	if err != nil {
		return Key{}, fmt.Errorf("read API key: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrKeyNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("read API key: %w", err)
	}
	return k, nil
}

// Update writes k's notes, scopes, tier, spatial scope, expiry, layers and
// overrides over those of the stored key k.ID; its secrets and its
// created and revoked times stay as they are.
func (s *Store) Update(ctx context.Context, k Key) error {
	if err := ValidateLayers(k.Layers); err != nil {
		return err
	}
	tag, err := s.db.Exec(ctx, `UPDATE api_keys SET notes = $2, scopes = $3, tier = $4, geo_scope = $5,
		expires_at = $6, layers = $7, overrides = $8, account = $9, db_role = $10, db_claims = $11 WHERE id = $1`, append([]any{k.ID}, keyArgs(k)...)...)
	if err != nil {
		return fmt.Errorf("update API key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrKeyNotFound
	}
	return nil
}

// Revoke marks key id revoked now. Revoking a revoked key keeps its first
// revocation time.
func (s *Store) Revoke(ctx context.Context, id string) error {
	tag, err := s.db.Exec(ctx, `UPDATE api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("revoke API key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return ErrKeyNotFound
	}
	return nil
}

// ErrKeyRevoked refuses to rotate a revoked key: a new secret would not
// make it usable.
var ErrKeyRevoked = apperr.New(apperr.Conflict, "The API key is revoked.")

// Rotate gives key id a new secret, which it returns. The secret it had
// keeps working for grace more (none when grace is 0); a secret replaced
// by an earlier rotation stops working at once.
func (s *Store) Rotate(ctx context.Context, id string, grace time.Duration) (string, error) {
	if grace < 0 {
		grace = 0
	}
	secret := NewSecret(id)
	h := HashSecret(secret)
	tag, err := s.db.Exec(ctx, `UPDATE api_keys SET previous_secret_hash = secret_hash,
		previous_secret_until = now() + make_interval(secs => $3), secret_hash = $2
		WHERE id = $1 AND revoked_at IS NULL`, id, h[:], grace.Seconds())
	if err != nil {
		return "", fmt.Errorf("rotate API key: %w", writeError(err))
	}
	if tag.RowsAffected() == 0 {
		if _, err := s.Get(ctx, id); err != nil {
			return "", err
		}
		return "", ErrKeyRevoked
	}
	return secret, nil
}

// ByHash returns the key whose secret hashes to h, revoked and expired
// ones included, or ErrKeyNotFound. A secret that a rotation replaced
// finds its key too, usable only until the key's PreviousSecretUntil.
func (s *Store) ByHash(ctx context.Context, h [32]byte) (Key, error) {
	rows, err := s.db.Query(ctx, `SELECT `+keyColumns+`, secret_hash <> $1 FROM api_keys
		WHERE secret_hash = $1 OR previous_secret_hash = $1 ORDER BY secret_hash <> $1 LIMIT 1`, h[:])
	if err != nil {
		return Key{}, fmt.Errorf("look up API key: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (Key, error) {
		var k Key
		err := scanInto(row, &k, &k.viaPrevious)
		return k, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrKeyNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up API key: %w", err)
	}
	return k, nil
}

func scanKey(row pgx.CollectableRow) (Key, error) {
	var k Key
	err := scanInto(row, &k)
	return k, err
}

// scanInto reads the keyColumns of row, and then extra, into k.
func scanInto(row pgx.CollectableRow, k *Key, extra ...any) error {
	var (
		tier, account, role *string
		geo, claims         []byte
		overrides           []byte
	)
	dest := append([]any{&k.ID, &k.Notes, &k.Scopes, &tier, &geo, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt, &k.Layers,
		&overrides, &k.PreviousSecretUntil, &account, &role, &claims}, extra...)
	if err := row.Scan(dest...); err != nil {
		return err
	}
	if tier != nil {
		k.Tier = *tier
	}
	if account != nil {
		k.Account = *account
	}
	if role != nil {
		k.DBRole = *role
	}
	if len(claims) > 0 {
		k.DBClaims = claims
	}
	if k.DBRole != "" {
		k.claims = keyClaims(*k)
	}
	if len(geo) > 0 {
		sp, err := spatial.Parse(geo)
		if err != nil {
			k.InvalidSpatial = &InvalidScope{Raw: geo, Reason: storedScopeReason(err)}
		}
		k.Spatial = sp
	}
	// A row written with plain SQL, not Create, is refused rather than
	// served with a meaning nobody checked.
	if err := ValidateLayers(k.Layers); err != nil {
		return fmt.Errorf("key %s has bad layers: %s", k.ID, apperr.MessageOf(err))
	}
	if len(overrides) > 0 {
		if err := json.Unmarshal(overrides, &k.Overrides); err != nil {
			return fmt.Errorf("key %s has bad overrides: %w", k.ID, err)
		}
	}
	return nil
}

// storedScopeReason says what is wrong with a stored scope Parse refused.
func storedScopeReason(err error) string {
	if r := spatial.Reason(err); r != "" {
		return r
	}
	return "it is not [minLng,minLat,maxLng,maxLat] or a GeoJSON Polygon or MultiPolygon in WGS84"
}
