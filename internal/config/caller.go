package config

import (
	"slices"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/auth"
)

// loadCallerRoles reads DB_CALLER_ROLES, the database roles callers may
// run as on the layers that run as their caller. A layer file with such
// layers needs at least one.
func loadCallerRoles(r *reader, rules map[string]access.Rule) []string {
	roles := r.list("DB_CALLER_ROLES", nil)
	for _, role := range roles {
		if !auth.ValidRole(role) {
			r.fail("DB_CALLER_ROLES", role, "a role name is lower-case letters, digits and _, starting with a letter or _")
		}
	}
	if len(roles) == 0 {
		ids := make([]string, 0)
		for id, rule := range rules {
			if rule.AsCaller {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		if len(ids) > 0 {
			r.fail("DB_CALLER_ROLES", "", "is required: layer "+ids[0]+" runs as its caller (as_caller in the layer file), and no caller could")
		}
	}
	return roles
}
