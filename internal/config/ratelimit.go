package config

import (
	"os"
	"strings"

	"github.com/geogate/geogate/internal/ratelimit"
)

// RateLimit holds the settings of internal/ratelimit: the named policies,
// built in, merged with the YAML file at RATELIMIT_CONFIG and overridden
// per policy by RATELIMIT_<POLICY>=10/1s,600/1m.
type RateLimit struct {
	File     string
	Policies map[string]ratelimit.Policy
}

func loadRateLimit(r *reader) RateLimit {
	rl := RateLimit{File: r.str("RATELIMIT_CONFIG", "")}
	var data []byte
	if rl.File != "" {
		var err error
		if data, err = os.ReadFile(rl.File); err != nil {
			r.fail("RATELIMIT_CONFIG", rl.File, "cannot read the policy file: "+err.Error())
			return rl
		}
	}
	ps, err := ratelimit.LoadPolicies(data, r.getenv)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				r.errs = append(r.errs, "rate limits: "+line)
			}
		}
		return rl
	}
	rl.Policies = ps
	return rl
}
