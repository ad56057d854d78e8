package config

import (
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
func loadRateLimit(r *reader) map[string]ratelimit.Policy {
	var data []byte
	if file := r.str("RATELIMIT_CONFIG", ""); file != "" {
		var err error
		if data, err = os.ReadFile(file); err != nil {
			r.fail("RATELIMIT_CONFIG", file, "cannot read the policy file: "+err.Error())
			return nil
		}
	}
	ps, err := loadPolicies(data, r)
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			if line = strings.TrimSpace(line); line != "" {
				r.errs = append(r.errs, "rate limits: "+line)
			}
		}
		return nil
	}
	return ps
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
	ps := ratelimit.DefaultPolicies()
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
