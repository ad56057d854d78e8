package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/spatial"
)

// Store keeps API keys in PostgreSQL (table api_keys, migration 00002).
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

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
	// tier, spatial scope, layers, expiry and notes; a revoked key is
	// restored).
	Replace bool
}

// Create stores a key and returns the secret, which is never stored nor
// shown again.
func (s *Store) Create(ctx context.Context, o CreateOptions) (string, error) {
	if !keyIDRe.MatchString(o.ID) {
		return "", apperr.New(apperr.Invalid, "A key id is 1 to 64 letters, digits, '_', '.' or '-', starting with a letter or digit.")
	}
	if o.Secret == "" {
		o.Secret = NewSecret(o.ID)
	}
	if err := checkKeyHeader(o.Secret); err != nil {
		return "", apperr.New(apperr.Invalid, "A secret is 1 to 256 printable ASCII characters without spaces.")
	}
	h := HashSecret(o.Secret)
	scopes := o.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	var tier *string
	if o.Tier != "" {
		tier = &o.Tier
	}
	var geo []byte
	if o.Spatial != nil {
		geo, _ = o.Spatial.MarshalJSON()
	}
	if err := ValidateLayers(o.Layers); err != nil {
		return "", err
	}
	q := insertKeySQL
	if o.Replace {
		q = upsertKeySQL
	}
	// A nil o.Layers is NULL, every layer.
	_, err := s.db.Exec(ctx, q, o.ID, h[:], o.Notes, scopes, tier, geo, o.ExpiresAt, o.Layers)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "23505" {
		if pe.ConstraintName == "api_keys_pkey" {
			return "", ErrKeyExists
		}
		return "", ErrSecretInUse
	}
	if err != nil {
		return "", fmt.Errorf("create API key: %w", err)
	}
	return o.Secret, nil
}

const insertKeySQL = `
INSERT INTO api_keys (id, secret_hash, notes, scopes, tier, geo_scope, expires_at, layers)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`

const upsertKeySQL = insertKeySQL + `
ON CONFLICT (id) DO UPDATE SET
    secret_hash = EXCLUDED.secret_hash, notes = EXCLUDED.notes, scopes = EXCLUDED.scopes,
    tier = EXCLUDED.tier, geo_scope = EXCLUDED.geo_scope, expires_at = EXCLUDED.expires_at,
    layers = EXCLUDED.layers, revoked_at = NULL`

const keyColumns = `id, notes, scopes, tier, geo_scope, created_at, expires_at, revoked_at, layers`

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

// ByHash returns the key whose secret hashes to h, revoked and expired
// ones included, or ErrKeyNotFound.
func (s *Store) ByHash(ctx context.Context, h [32]byte) (Key, error) {
	rows, err := s.db.Query(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE secret_hash = $1`, h[:])
	if err != nil {
		return Key{}, fmt.Errorf("look up API key: %w", err)
	}
	k, err := pgx.CollectExactlyOneRow(rows, scanKey)
	if errors.Is(err, pgx.ErrNoRows) {
		return Key{}, ErrKeyNotFound
	}
	if err != nil {
		return Key{}, fmt.Errorf("look up API key: %w", err)
	}
	return k, nil
}

func scanKey(row pgx.CollectableRow) (Key, error) {
	var (
		k    Key
		tier *string
		geo  []byte
	)
	if err := row.Scan(&k.ID, &k.Notes, &k.Scopes, &tier, &geo, &k.CreatedAt, &k.ExpiresAt, &k.RevokedAt, &k.Layers); err != nil {
		return Key{}, err
	}
	if tier != nil {
		k.Tier = *tier
	}
	if len(geo) > 0 {
		sp, err := spatial.Parse(geo)
		if err != nil {
			return Key{}, fmt.Errorf("key %s has a bad geo_scope: %w", k.ID, err)
		}
		k.Spatial = sp
	}
	// As for geo_scope: a row written with plain SQL, not Create, is
	// refused rather than served with a meaning nobody checked.
	if err := ValidateLayers(k.Layers); err != nil {
		return Key{}, fmt.Errorf("key %s has bad layers: %s", k.ID, apperr.MessageOf(err))
	}
	return k, nil
}
