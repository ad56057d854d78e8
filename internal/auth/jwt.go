package auth

// TokenVerifier verifies bearer JWTs.
type TokenVerifier struct{}

// Verify checks tok and returns the identity it carries.
func (v *TokenVerifier) Verify(tok string) (Identity, error) {
	return Identity{}, errInvalidToken
}
