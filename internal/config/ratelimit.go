package config

// RateLimit holds the settings of internal/ratelimit.
type RateLimit struct{}

func loadRateLimit(r *reader) RateLimit {
	return RateLimit{}
}
