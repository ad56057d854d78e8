package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // policy time zones resolve without the system's zoneinfo

	"github.com/goccy/go-yaml"

	"github.com/geogate/geogate/internal/ratelimit"
)

// loadRateLimit builds the named policies: the built-in ones, merged with
// the YAML file at RATELIMIT_CONFIG, then each policy's windows overridden
// by RATELIMIT_<POLICY>=10/1s,600/1m.
func loadRateLimit(r *reader) (map[string]ratelimit.Policy, string) {
	version := "builtin"
	var data []byte
	if file := r.str("RATELIMIT_CONFIG", ""); file != "" {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			r.fail("RATELIMIT_CONFIG", file, "cannot read the policy file: "+err.Error())
			return nil, ""
		}
		sum := sha256.Sum256(data)
		version = "sha256:" + hex.EncodeToString(sum[:8])
	}
	ps, err := loadPolicies(data, r)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				r.errs = append(r.errs, "rate limits: "+line)
			}
		}
		return nil, ""
	}
	return ps, version
}

// LoadRateLimit reads the policies again, as Load does: the built-in
// ones, the file at RATELIMIT_CONFIG and the RATELIMIT_<POLICY>
// variables. It returns them with their version (see
// Config.RateLimitVersion), or every problem found.
func LoadRateLimit(getenv func(string) string) (map[string]ratelimit.Policy, string, error) {
	r := &reader{getenv: getenv}
	ps, version := loadRateLimit(r)
	if len(r.errs) > 0 {
		return nil, "", errors.New(strings.Join(r.errs, "; "))
	}
	return ps, version, nil
}

// Limits are the settings of policy changes made while the service runs.
type Limits struct {
	// TallyDays is how many days each key's daily tallies of admitted and
	// refused requests are kept after the day; 0 keeps none.
	TallyDays int
	// Poll is how often overrides are read again even without a
	// notification (a safety net for a missed one).
	Poll time.Duration
}

func loadLimits(r *reader) Limits {
	return Limits{
		TallyDays: r.integer("KEY_USAGE_DAYS", 35, 0, 400),
		Poll:      r.duration("OVERRIDES_POLL", time.Minute),
	}
}

// policyEnv is the variable that overrides a policy's windows, for example
// RATELIMIT_TILES_CACHED for "tiles-cached".
func policyEnv(policy string) string {
	return "RATELIMIT_" + strings.ReplaceAll(strings.ToUpper(policy), "-", "_")
}

// policyFile is the YAML policy file. Window lists are strings in the
// ratelimit.ParseWindows syntax.
type policyFile struct {
	Policies map[string]filePolicy `yaml:"policies"`
}

type filePolicy struct {
	Windows     string            `yaml:"windows"`
	Algorithm   string            `yaml:"algorithm"`
	Failure     string            `yaml:"failure"`
	Shadow      *bool             `yaml:"shadow"`
	Concurrency *int              `yaml:"concurrency"`
	Lease       string            `yaml:"lease"`
	Tiers       map[string]string `yaml:"tiers"`
	Identities  map[string]string `yaml:"identities"`
	Timezone    string            `yaml:"timezone"`
}

// loadPolicies merges the YAML document file (may be empty) onto the
// built-in policies, applies the RATELIMIT_<POLICY> overrides and
// validates the result. Every problem is reported at once.
func loadPolicies(file []byte, r *reader) (map[string]ratelimit.Policy, error) {
	ps := DefaultPolicies()
	var errs []error
	if len(file) > 0 {
		var f policyFile
		if err := yaml.UnmarshalWithOptions(file, &f, yaml.Strict()); err != nil {
			return nil, fmt.Errorf("policy file: %s", yaml.FormatError(err, false, true))
		}
		for name, fp := range f.Policies {
			p, ok := ps[name]
			if !ok {
				p = ratelimit.NewPolicy(name)
			}
			if err := fp.apply(&p); err != nil {
				errs = append(errs, fmt.Errorf("policy %s: %w", name, err))
				continue
			}
			ps[name] = p
		}
	}
	names := make([]string, 0, len(ps))
	for name := range ps {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		p := ps[name]
		if v := r.str(policyEnv(name), ""); v != "" {
			ws, err := ratelimit.ParseWindows(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s=%q: %w", policyEnv(name), v, err))
				continue
			}
			p.Windows = ws
			ps[name] = p
		}
		if err := p.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return ps, nil
}

func (fp filePolicy) apply(p *ratelimit.Policy) error {
	var err error
	if fp.Windows != "" {
		if p.Windows, err = ratelimit.ParseWindows(fp.Windows); err != nil {
			return err
		}
	}
	if fp.Algorithm != "" {
		p.Algorithm = ratelimit.Algorithm(fp.Algorithm)
	}
	if fp.Failure != "" {
		p.Failure = ratelimit.FailureMode(fp.Failure)
	}
	if fp.Shadow != nil {
		p.Shadow = *fp.Shadow
	}
	if fp.Concurrency != nil {
		p.Concurrency = *fp.Concurrency
	}
	if fp.Lease != "" {
		if p.Lease, err = time.ParseDuration(fp.Lease); err != nil {
			return fmt.Errorf("lease %q: want a duration such as 30s", fp.Lease)
		}
	}
	if fp.Timezone != "" {
		// "Local" would make each replica's calendar its own machine's.
		if p.Location, err = time.LoadLocation(fp.Timezone); err != nil || fp.Timezone == "Local" {
			return fmt.Errorf("timezone %q: want an IANA time zone such as UTC or Europe/Berlin", fp.Timezone)
		}
	}
	if p.Tiers, err = parseWindowMap("tier", fp.Tiers); err != nil {
		return err
	}
	p.Identities, err = parseWindowMap("identity", fp.Identities)
	return err
}

// parseWindowMap parses the window lists of the tier or identity
// overrides of a policy.
func parseWindowMap(what string, m map[string]string) (map[string][]ratelimit.Window, error) {
	if len(m) == 0 {
		return nil, nil
	}
	out := make(map[string][]ratelimit.Window, len(m))
	for k, v := range m {
		ws, err := ratelimit.ParseWindows(v)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", what, k, err)
		}
		out[k] = ws
	}
	return out, nil
}
