package admin

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/geogate/geogate/internal/apperr"
)

// Tier actions in the audit trail.
const (
	ActionSetTier    = "set-tier"
	ActionDeleteTier = "delete-tier"
)

// Tier is the rate-limit overrides of one tier: per policy, the windows
// its callers get instead of the policy's own.
type Tier struct {
	Tier      string            `json:"tier"`
	Overrides map[string]string `json:"overrides"`
}

// Tiers returns every tier that has overrides, by name.
func (s *Service) Tiers(ctx context.Context) ([]Tier, error) {
	rows, err := s.db.Query(ctx, `SELECT tier, policy, windows FROM tier_overrides ORDER BY tier, policy`)
	if err != nil {
		return nil, fmt.Errorf("read tier overrides: %w", err)
	}
	var out []Tier
	var tier, policy, windows string
	_, err = pgx.ForEachRow(rows, []any{&tier, &policy, &windows}, func() error {
		if len(out) == 0 || out[len(out)-1].Tier != tier {
			out = append(out, Tier{Tier: tier, Overrides: map[string]string{}})
		}
		out[len(out)-1].Overrides[policy] = windows
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read tier overrides: %w", err)
	}
	return out, nil
}

// Tier returns one tier's overrides; a tier without any is a NotFound.
func (s *Service) Tier(ctx context.Context, tier string) (Tier, error) {
	if err := validTier(tier); err != nil {
		return Tier{}, err
	}
	all, err := s.Tiers(ctx)
	if err != nil {
		return Tier{}, err
	}
	for _, t := range all {
		if t.Tier == tier {
			return t, nil
		}
	}
	return Tier{}, apperr.Errorf(apperr.NotFound, "Tier %q has no overrides.", tier)
}

// SetTier replaces the overrides of tier with overrides (none deletes
// them), recorded in the audit trail in the same transaction. Every
// replica applies the change once the notification of the commit reaches
// it.
func (s *Service) SetTier(ctx context.Context, a Actor, tier string, overrides map[string]string) (Tier, error) {
	if err := validTier(tier); err != nil {
		return Tier{}, err
	}
	errs := &apperr.ValidationError{}
	s.validateOverrides(errs, overrides)
	if err := errs.Err(); err != nil {
		return Tier{}, err
	}
	overrides = normalOverrides(overrides)
	if len(overrides) == 0 {
		return Tier{Tier: tier, Overrides: map[string]string{}}, s.DeleteTier(ctx, a, tier)
	}
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		before, err := tierIn(ctx, tx, tier)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tier_overrides WHERE tier = $1`, tier); err != nil {
			return fmt.Errorf("set tier %s: %w", tier, err)
		}
		for _, p := range slices.Sorted(maps.Keys(overrides)) {
			if _, err := tx.Exec(ctx, `INSERT INTO tier_overrides (tier, policy, windows) VALUES ($1, $2, $3)`,
				tier, p, overrides[p]); err != nil {
				return fmt.Errorf("set tier %s: %w", tier, err)
			}
		}
		return recordTier(ctx, tx, a, ActionSetTier, tier, map[string]any{"overrides": map[string]any{"from": before, "to": overrides}})
	})
	if err != nil {
		return Tier{}, err
	}
	return Tier{Tier: tier, Overrides: overrides}, nil
}

// DeleteTier removes every override of tier; a tier without any is a
// NotFound.
func (s *Service) DeleteTier(ctx context.Context, a Actor, tier string) error {
	if err := validTier(tier); err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		before, err := tierIn(ctx, tx, tier)
		if err != nil {
			return err
		}
		if len(before) == 0 {
			return apperr.Errorf(apperr.NotFound, "Tier %q has no overrides.", tier)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tier_overrides WHERE tier = $1`, tier); err != nil {
			return fmt.Errorf("delete tier %s: %w", tier, err)
		}
		return recordTier(ctx, tx, a, ActionDeleteTier, tier, map[string]any{"overrides": map[string]any{"from": before, "to": nil}})
	})
}

// tierIn reads tier's overrides in tx, locking them against a concurrent
// change (the audit's "from" must be what was replaced).
func tierIn(ctx context.Context, tx pgx.Tx, tier string) (map[string]string, error) {
	// Serializes changes to one tier, also while it has no rows to lock.
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('geogate tier ' || $1))`, tier); err != nil {
		return nil, fmt.Errorf("lock tier %s: %w", tier, err)
	}
	rows, err := tx.Query(ctx, `SELECT policy, windows FROM tier_overrides WHERE tier = $1`, tier)
	if err != nil {
		return nil, fmt.Errorf("read tier %s: %w", tier, err)
	}
	out := map[string]string{}
	var p, w string
	_, err = pgx.ForEachRow(rows, []any{&p, &w}, func() error { out[p] = w; return nil })
	if err != nil {
		return nil, fmt.Errorf("read tier %s: %w", tier, err)
	}
	return out, nil
}

func validTier(tier string) error {
	if !tierRe.MatchString(tier) {
		return apperr.InvalidField("A tier is 1 to 64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit.",
			"string_pattern_mismatch", "path", "tier")
	}
	return nil
}
