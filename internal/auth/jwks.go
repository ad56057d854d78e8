package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// maxJWKSBytes bounds a key set document.
const maxJWKSBytes = 1 << 20

// minRefreshGap bounds how often a token with an unknown kid can make the
// key set reload: forged kids must not turn into a flood of fetches.
const minRefreshGap = 30 * time.Second

// JWKS is a JSON Web Key Set loaded from a file or an URL, reloaded every
// refresh interval and, at most every 30 seconds, when a token names a key
// id it does not hold (keys rotate).
type JWKS struct {
	load    func(ctx context.Context) ([]byte, error)
	refresh time.Duration
	log     *slog.Logger
	now     func() time.Time

	mu          sync.RWMutex
	keys        []jwk
	lastAttempt time.Time
	sf          singleflight.Group
}

type jwk struct {
	kid string
	alg string // "" when the set does not restrict it
	key any
}

// NewJWKSFile returns a key set read from path.
func NewJWKSFile(path string, refresh time.Duration, log *slog.Logger) *JWKS {
	return newJWKS(func(context.Context) ([]byte, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return io.ReadAll(io.LimitReader(f, maxJWKSBytes+1))
	}, refresh, log)
}

// NewJWKSURL returns a key set fetched from url with client (nil: a client
// with a 5 s timeout).
func NewJWKSURL(url string, client *http.Client, refresh time.Duration, log *slog.Logger) *JWKS {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	return newJWKS(func(ctx context.Context) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	}, refresh, log)
}

func newJWKS(load func(context.Context) ([]byte, error), refresh time.Duration, log *slog.Logger) *JWKS {
	if log == nil {
		log = slog.Default()
	}
	return &JWKS{load: load, refresh: refresh, log: log, now: time.Now}
}

// Start loads the key set once, failing if it cannot, and then reloads it
// every refresh interval until ctx ends. A failed reload keeps the keys
// already loaded.
func (j *JWKS) Start(ctx context.Context) error {
	if err := j.Reload(ctx); err != nil {
		return err
	}
	if j.refresh <= 0 {
		return nil
	}
	go func() {
		t := time.NewTicker(j.refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := j.Reload(ctx); err != nil {
					j.log.Warn("JWKS reload failed; keeping the previous keys", "err", err.Error())
				}
			}
		}
	}()
	return nil
}

// Reload fetches and parses the key set now.
func (j *JWKS) Reload(ctx context.Context) error {
	j.mu.Lock()
	j.lastAttempt = j.now()
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	data, err := j.load(ctx)
	if err != nil {
		return fmt.Errorf("JWKS: %w", err)
	}
	if len(data) > maxJWKSBytes {
		return errors.New("JWKS: document larger than 1 MiB")
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.keys = keys
	j.mu.Unlock()
	return nil
}

// Keys returns the keys that can verify alg: the one with key id kid, or
// when kid is empty every key of the right kind. An unknown kid triggers a
// rate-limited reload.
func (j *JWKS) Keys(kid, alg string) []any {
	if out := j.match(kid, alg); len(out) > 0 || kid == "" {
		return out
	}
	j.mu.RLock()
	due := j.now().Sub(j.lastAttempt) >= minRefreshGap
	j.mu.RUnlock()
	if !due {
		return nil
	}
	_, _, _ = j.sf.Do("reload", func() (any, error) {
		if err := j.Reload(context.Background()); err != nil {
			j.log.Warn("JWKS reload for an unknown key id failed", "err", err.Error())
		}
		return nil, nil
	})
	return j.match(kid, alg)
}

func (j *JWKS) match(kid, alg string) []any {
	j.mu.RLock()
	defer j.mu.RUnlock()
	var out []any
	for _, k := range j.keys {
		if kid != "" && k.kid != kid {
			continue
		}
		if (k.alg == "" || k.alg == alg) && keyFits(k.key, alg) {
			out = append(out, k.key)
		}
	}
	return out
}

// parseJWKS parses a JSON Web Key Set ({"keys":[...]}) into public keys.
// Keys that are not for signatures, of unknown types, or too weak (RSA
// under 2048 bits) are skipped; a set with no usable key is an error.
func parseJWKS(data []byte) ([]jwk, error) {
	var set struct {
		Keys []struct {
			Kty string `json:"kty"`
			Kid string `json:"kid"`
			Use string `json:"use"`
			Alg string `json:"alg"`
			Crv string `json:"crv"`
			N   string `json:"n"`
			E   string `json:"e"`
			X   string `json:"x"`
			Y   string `json:"y"`
			D   string `json:"d"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("JWKS: not a JSON Web Key Set: %w", err)
	}
	var out []jwk
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if k.D != "" {
			return nil, errors.New("JWKS: the key set holds a private key; publish only public keys")
		}
		key, err := parseJWK(k.Kty, k.Crv, k.N, k.E, k.X, k.Y)
		if err != nil || key == nil {
			continue
		}
		out = append(out, jwk{kid: k.Kid, alg: k.Alg, key: key})
	}
	if len(out) == 0 {
		return nil, errors.New("JWKS: no usable RS256, ES256 or EdDSA key")
	}
	return out, nil
}

func parseJWK(kty, crv, n, e, x, y string) (any, error) {
	b64 := base64.RawURLEncoding.DecodeString
	switch kty {
	case "RSA":
		nb, err1 := b64(n)
		eb, err2 := b64(e)
		if err1 != nil || err2 != nil || len(eb) == 0 || len(eb) > 4 {
			return nil, errors.New("bad RSA key")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: int(new(big.Int).SetBytes(eb).Int64())}
		if pub.N.BitLen() < 2048 || pub.E < 3 {
			return nil, errors.New("weak RSA key")
		}
		return pub, nil
	case "EC":
		if crv != "P-256" {
			return nil, nil
		}
		xb, err1 := b64(x)
		yb, err2 := b64(y)
		if err1 != nil || err2 != nil || len(xb) != 32 || len(yb) != 32 {
			return nil, errors.New("bad EC key")
		}
		return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, xb...), yb...))
	case "OKP":
		if crv != "Ed25519" {
			return nil, nil
		}
		xb, err := b64(x)
		if err != nil || len(xb) != ed25519.PublicKeySize {
			return nil, errors.New("bad Ed25519 key")
		}
		return ed25519.PublicKey(xb), nil
	}
	return nil, nil
}
