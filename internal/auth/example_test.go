package auth_test

import (
	"fmt"
	"net/http/httptest"

	"github.com/geogate/geogate/internal/auth"
)

// A request is authenticated once, then each route names its scope with
// Allow; the error of either is the answer.
func ExampleAllow() {
	a := auth.NewAuthenticator(auth.Options{AnonymousScopes: auth.ReadScopes})
	for _, tc := range []struct{ method, scope string }{
		{"GET", auth.ScopeProximityRead},
		{"POST", auth.ScopeGeofencesWrite},
	} {
		r := httptest.NewRequest(tc.method, "/", nil)
		r.RemoteAddr = "[2001:db8:1:2::7]:50000"
		ctx, err := a.Admit(r)
		if err == nil {
			err = auth.Allow(ctx, r, tc.scope)
		}
		if err != nil {
			fmt.Println(tc.method, tc.scope, "refused:", err)
			continue
		}
		fmt.Println(tc.method, tc.scope, "as", auth.FromContext(ctx).LimitKey())
	}
	// Output:
	// GET proximity:read as ip:2001:db8:1:2::/64
	// POST geofences:write refused: Authentication required: send an API key in the x-api-key header or a bearer token in the Authorization header.
}
