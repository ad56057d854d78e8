package ratelimit

import "time"

// seedPolicies are the policies the tests start from: the seed's
// geofence policy, 10 a second.
func seedPolicies() map[string]Policy {
	return map[string]Policy{"geofence": NewPolicy("geofence", Window{Limit: 10, Period: time.Second})}
}
