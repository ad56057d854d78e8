package auth

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strings"
)

// BasicChallenge is the challenge that lets a browser, or any client that
// waits to be asked, send an API key as HTTP Basic credentials.
const BasicChallenge = `Basic realm="geogate", charset="UTF-8"`

// isBasic reports whether an Authorization header value uses the Basic
// scheme (case-insensitive, as RFC 9110 says of schemes).
func isBasic(authz string) bool {
	scheme, _, _ := strings.Cut(strings.TrimSpace(authz), " ")
	return strings.EqualFold(scheme, "Basic")
}

// basicCredentials returns the key id (the user name, possibly empty)
// and the secret (the password) of an Authorization: Basic header value.
// Clients that cannot set an x-api-key header (QGIS, GDAL, OWSLib,
// browsers) can all send these.
func basicCredentials(authz string) (id, secret string, err error) {
	_, enc, _ := strings.Cut(strings.TrimSpace(authz), " ")
	enc = strings.TrimSpace(enc)
	if enc == "" || len(enc) > 2*MaxKeyLength {
		return "", "", errMalformedBasic
	}
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return "", "", errMalformedBasic
	}
	id, secret, ok := strings.Cut(string(raw), ":")
	if !ok || (id != "" && !ValidKeyID(id)) {
		return "", "", errMalformedBasic
	}
	return id, secret, nil
}

// authenticateBasic verifies an API key sent as Basic credentials. The
// secret is looked up exactly as an x-api-key header is, by its hash, so
// no string comparison of secrets can leak timing. A user name, when
// given, must be the id of the key the secret belongs to: a wrong pair is
// refused as an invalid key, without saying which half was wrong.
func (a *Authenticator) authenticateBasic(ctx context.Context, authz string) (Identity, error) {
	id, secret, err := basicCredentials(authz)
	if err != nil {
		return Identity{}, err
	}
	ident, err := a.authenticateKey(ctx, secret)
	if err != nil {
		return Identity{}, err
	}
	if id != "" && subtle.ConstantTimeCompare([]byte(id), []byte(ident.ID)) != 1 {
		return Identity{}, errInvalidKey
	}
	return ident, nil
}

// offersBasic reports whether a 401 to r should offer the Basic challenge:
// when r tried Basic (so that a browser asks again instead of resending
// the credentials it holds), or when r carries no credentials and is a
// browser's navigation (so that a person opening a URL is asked for a
// key). A script's fetch, or a client that sent x-api-key or a bearer
// token, never gets it: browsers would pop up a login dialog over a page
// that handles credentials itself.
func offersBasic(r *http.Request) bool {
	authz := r.Header.Values("Authorization")
	if len(authz) > 0 {
		return isBasic(authz[0])
	}
	return len(r.Header.Values("X-Api-Key")) == 0 && r.Header.Get("Sec-Fetch-Mode") == "navigate"
}
