// Package limits keeps the rate-limit policies in force up to date while
// the service runs: the policies of the policy file, which an operator
// replaces (SIGHUP), and the per-tier and per-key overrides stored in
// PostgreSQL, which every replica hears of through LISTEN/NOTIFY and
// applies within a second. It composes the two and hands the result to the
// limiter whole.
package limits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/geogate/geogate/internal/ratelimit"
)

// Setter takes a complete set of policies (ratelimit.Limiter).
type Setter interface {
	SetPolicies(map[string]ratelimit.Policy) error
}

// Channels a change to overrides is announced on: the tier_overrides
// trigger (migration 00013) and the api_keys trigger (migration 00012).
const (
	TierChannel = "geogate_limits"
	KeyChannel  = "geogate_keys"
)

// Override is the windows a tier or a key gets instead of a policy's.
type Override struct {
	// Tier or Identity (the limiter's identity of a key) it applies to.
	Tier, Identity string
	Policy         string
	Windows        string
}

// Source composes the policies in force: a base set (the policy file's)
// with the overrides read from the database on top. A database override
// replaces the base's override for the same tier or identity.
type Source struct {
	set  Setter
	read func(context.Context) ([]Override, error)
	log  *slog.Logger
	m    *metrics

	mu        sync.Mutex // one apply at a time
	base      map[string]ratelimit.Policy
	version   string
	overrides []Override
}

// New returns a Source that applies to set the base policies of version
// with the overrides read returns. Nothing is applied before Reload.
func New(set Setter, base map[string]ratelimit.Policy, version string, read func(context.Context) ([]Override, error),
	log *slog.Logger, reg prometheus.Registerer) *Source {
	s := &Source{set: set, read: read, log: log, m: newMetrics(reg), base: base, version: version}
	s.m.version(version)
	return s
}

// Check says whether policy can run with ws in place of its windows,
// as an override would put them.
func (s *Source) Check(policy string, ws []ratelimit.Window) error {
	s.mu.Lock()
	p, ok := s.base[policy]
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("unknown policy %s", policy)
	}
	p.Windows, p.Tiers, p.Identities = ws, nil, nil
	if err := p.Validate(); err != nil {
		_, msg, _ := strings.Cut(err.Error(), ": windows: ")
		if msg == "" {
			msg = err.Error()
		}
		return errors.New(msg)
	}
	return nil
}

// Reload reads the overrides again and applies them. On error the
// policies in force stay as they are.
func (s *Source) Reload(ctx context.Context) error {
	o, err := s.read(ctx)
	if err != nil {
		s.m.overrideReads.WithLabelValues("error").Inc()
		return fmt.Errorf("read rate-limit overrides: %w", err)
	}
	s.m.overrideReads.WithLabelValues("ok").Inc()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overrides = o
	return s.apply(s.base)
}

// SetBase replaces the base policies, as a re-read policy file gives
// them. A set the limiter refuses leaves everything as it was; the error
// says why, and the reload metrics count it.
func (s *Source) SetBase(base map[string]ratelimit.Policy, version string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.apply(base); err != nil {
		s.m.reloads.WithLabelValues("error").Inc()
		s.m.lastReloadOK.Set(0)
		return err
	}
	s.base, s.version = base, version
	s.m.reloads.WithLabelValues("ok").Inc()
	s.m.lastReloadOK.Set(1)
	s.m.version(version)
	return nil
}

// Names are the names of the policies in force, sorted.
func (s *Source) Names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.base))
}

// Version is the version of the base policies in force.
func (s *Source) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// apply composes base with the overrides and hands them to the limiter.
func (s *Source) apply(base map[string]ratelimit.Policy) error {
	ps, applied, skipped := compose(base, s.overrides)
	for _, err := range skipped {
		s.log.Warn("rate-limit override not applied", "err", err.Error())
	}
	if err := s.set.SetPolicies(ps); err != nil {
		return err
	}
	s.m.overrides.WithLabelValues("tier").Set(float64(applied.tiers))
	s.m.overrides.WithLabelValues("key").Set(float64(applied.keys))
	s.m.invalid.Set(float64(len(skipped)))
	return nil
}

// applied counts the overrides in force, by kind.
type applied struct{ tiers, keys int }

// compose puts overrides on top of base, each checked on its own: one
// that names an unknown policy or windows the policy cannot run with is
// left out, and reported.
func compose(base map[string]ratelimit.Policy, overrides []Override) (map[string]ratelimit.Policy, applied, []error) {
	var n applied
	out := make(map[string]ratelimit.Policy, len(base))
	for name, p := range base {
		p.Tiers, p.Identities = maps.Clone(p.Tiers), maps.Clone(p.Identities)
		out[name] = p
	}
	var skipped []error
	for _, o := range overrides {
		who := "tier " + o.Tier
		if o.Tier == "" {
			who = "identity " + o.Identity
		}
		p, ok := out[o.Policy]
		if !ok {
			skipped = append(skipped, fmt.Errorf("%s: unknown policy %s", who, o.Policy))
			continue
		}
		ws, err := ratelimit.ParseWindows(o.Windows)
		if err == nil {
			alone := p
			alone.Windows, alone.Tiers, alone.Identities = ws, nil, nil
			err = alone.Validate()
		}
		if err != nil {
			skipped = append(skipped, fmt.Errorf("%s, policy %s: %w", who, o.Policy, err))
			continue
		}
		if o.Tier != "" {
			if p.Tiers == nil {
				p.Tiers = map[string][]ratelimit.Window{}
			}
			p.Tiers[o.Tier] = ws
			n.tiers++
		} else {
			if p.Identities == nil {
				p.Identities = map[string][]ratelimit.Window{}
			}
			p.Identities[o.Identity] = ws
			n.keys++
		}
		out[o.Policy] = p
	}
	return out, n, skipped
}

// Run keeps the overrides current until ctx ends: it reads them again
// each time a change is announced, after every (re)connection of its
// listener, and every poll in case a notification was missed. listen
// starts the listener, given the func to call on each event.
func (s *Source) Run(ctx context.Context, listen func(ctx context.Context, changed func()), poll time.Duration) {
	kick := make(chan struct{}, 1)
	changed := func() {
		select {
		case kick <- struct{}{}:
		default: // a reload is already due; it will see this change too
		}
	}
	go listen(ctx, changed)
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-t.C:
		}
		if err := s.Reload(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("rate-limit overrides not reloaded; the ones in force stay", "err", err.Error())
		}
	}
}

// Refused counts a re-read of the base policies that failed before
// reaching SetBase (a file that cannot be read or parsed).
func (s *Source) Refused() {
	s.m.reloads.WithLabelValues("error").Inc()
	s.m.lastReloadOK.Set(0)
}
