package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/fairshare"
)

func TestLoadFairShare(t *testing.T) {
	base := map[string]string{"DATABASE_URL": "postgres://u@localhost/db", "REDIS_URL": "redis://localhost:6379/0"}
	tests := []struct {
		name    string
		env     map[string]string
		want    FairShare
		wantErr []string
	}{
		{"Defaults", nil, FairShare{On: true, Settings: fairshare.Settings{
			Slots: 20, MaxWait: time.Second, MaxQueue: 1280, HalfLife: 5 * time.Second,
			Group:    fairshare.Grouping{By: "account", IPv4Bits: 24, IPv6Bits: 48},
			Adaptive: true, MinSlots: 2, Tolerance: 2,
		}}, nil},
		{"FollowsThePool", map[string]string{"DB_MAX_CONNS": "8", "DB_ACQUIRE_TIMEOUT": "300ms"}, FairShare{On: true, Settings: fairshare.Settings{
			Slots: 8, MaxWait: 300 * time.Millisecond, MaxQueue: 512, HalfLife: 5 * time.Second,
			Group:    fairshare.Grouping{By: "account", IPv4Bits: 24, IPv6Bits: 48},
			Adaptive: true, MinSlots: 2, Tolerance: 2,
		}}, nil},
		{"Set", map[string]string{
			"DB_FAIR_SHARE": "false", "DB_FAIR_SLOTS": "4", "DB_FAIR_MAX_WAIT": "500ms",
			"DB_FAIR_MAX_QUEUE": "100", "DB_FAIR_HALF_LIFE": "2s", "TIER_WEIGHTS": " gold=4, silver = 2 ",
			"DB_FAIR_IDENTITY": "tier", "DB_FAIR_IPV4_PREFIX": "16", "DB_FAIR_IPV6_PREFIX": "64",
			"DB_FAIR_ADAPTIVE": "false", "DB_FAIR_MIN_SLOTS": "3", "DB_FAIR_LATENCY_TOLERANCE": "2.5",
		}, FairShare{On: false, Settings: fairshare.Settings{
			Slots: 4, MaxWait: 500 * time.Millisecond, MaxQueue: 100, HalfLife: 2 * time.Second,
			MinSlots: 3, Tolerance: 2.5,
			Weights: map[string]int{"gold": 4, "silver": 2},
			Group:   fairshare.Grouping{By: "tier", IPv4Bits: 16, IPv6Bits: 64},
		}}, nil},
		{"WaitWithinQueryTimeout", map[string]string{"DB_QUERY_TIMEOUT": "500ms"}, FairShare{On: true, Settings: fairshare.Settings{
			Slots: 20, MaxWait: 250 * time.Millisecond, MaxQueue: 1280, HalfLife: 5 * time.Second,
			Group:    fairshare.Grouping{By: "account", IPv4Bits: 24, IPv6Bits: 48},
			Adaptive: true, MinSlots: 2, Tolerance: 2,
		}}, nil},
		{"NoSlots", map[string]string{"DB_FAIR_SLOTS": "0"}, FairShare{}, []string{"DB_FAIR_SLOTS"}},
		{"WaitPastQueryTimeout", map[string]string{"DB_FAIR_MAX_WAIT": "2s"}, FairShare{}, []string{"DB_FAIR_MAX_WAIT", "DB_QUERY_TIMEOUT"}},
		{"WeightNotPair", map[string]string{"TIER_WEIGHTS": "gold"}, FairShare{}, []string{"TIER_WEIGHTS", "tier=weight"}},
		{"WeightZero", map[string]string{"TIER_WEIGHTS": "gold=0"}, FairShare{}, []string{"TIER_WEIGHTS", "gold"}},
		{"WeightNotNumber", map[string]string{"TIER_WEIGHTS": "gold=x"}, FairShare{}, []string{"TIER_WEIGHTS", "gold"}},
		{"TierTwice", map[string]string{"TIER_WEIGHTS": "gold=2,gold=3"}, FairShare{}, []string{"TIER_WEIGHTS", "twice"}},
		{"NotBoolean", map[string]string{"DB_FAIR_SHARE": "maybe"}, FairShare{}, []string{"DB_FAIR_SHARE"}},
		{"UnknownGrouping", map[string]string{"DB_FAIR_IDENTITY": "owner"}, FairShare{}, []string{"DB_FAIR_IDENTITY", "account"}},
		{"PrefixTooWide", map[string]string{"DB_FAIR_IPV4_PREFIX": "33"}, FairShare{}, []string{"DB_FAIR_IPV4_PREFIX"}},
		{"MinSlotsPastSlots", map[string]string{"DB_FAIR_SLOTS": "4", "DB_FAIR_MIN_SLOTS": "5"}, FairShare{}, []string{"DB_FAIR_MIN_SLOTS", "between 1 and 4"}},
		{"ToleranceNotNumber", map[string]string{"DB_FAIR_LATENCY_TOLERANCE": "fast"}, FairShare{}, []string{"DB_FAIR_LATENCY_TOLERANCE", "not a number"}},
		{"ToleranceTooTight", map[string]string{"DB_FAIR_LATENCY_TOLERANCE": "1"}, FairShare{}, []string{"DB_FAIR_LATENCY_TOLERANCE", "between 1.05 and 100"}},
		{"OneSlotIsTheLeast", map[string]string{"DB_FAIR_SLOTS": "1"}, FairShare{On: true, Settings: fairshare.Settings{
			Slots: 1, MaxWait: time.Second, MaxQueue: 64, HalfLife: 5 * time.Second,
			Group:    fairshare.Grouping{By: "account", IPv4Bits: 24, IPv6Bits: 48},
			Adaptive: true, MinSlots: 1, Tolerance: 2,
		}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := Load(func(k string) string { return env[k] }, NeedPostgres, NeedRedis)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatalf("Load(%v) = nil error, want one naming %v", tt.env, tt.wantErr)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Load(%v) = %v, want it to name %q", tt.env, err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load(%v) = %v", tt.env, err)
			}
			if diff := cmp.Diff(tt.want, cfg.FairShare); diff != "" {
				t.Errorf("Load(%v).FairShare (-want +got):\n%s", tt.env, diff)
			}
		})
	}
}
