package config

// Auth holds the settings of internal/auth.
type Auth struct{}

func loadAuth(r *reader) Auth {
	return Auth{}
}
