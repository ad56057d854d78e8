package fairshare

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestGroupingName(t *testing.T) {
	addr := netip.MustParseAddr
	key := func(id, account, tier string) Caller { return Caller{Key: "key:" + id, Account: account, Tier: tier} }
	anon := func(a string) Caller { return Caller{Key: "ip:" + a, Anonymous: true, Addr: addr(a)} }
	tests := []struct {
		name string
		g    Grouping
		c    Caller
		want string
	}{
		{"KeyAlone", Grouping{By: ByKey}, key("k1", "acme", "gold"), "key:k1"},
		{"AddressAlone", Grouping{By: ByKey}, anon("192.0.2.7"), "ip:192.0.2.7"},
		{"KeysOfAnAccount", Grouping{By: ByAccount}, key("k1", "acme", "gold"), "account:acme"},
		{"KeyWithoutAccount", Grouping{By: ByAccount}, key("k2", "", "gold"), "key:k2"},
		{"TokenSubject", Grouping{By: ByAccount}, Caller{Key: "sub:alice"}, "sub:alice"},
		{"IPv4Network", Grouping{By: ByAccount}, anon("192.0.2.7"), "net:192.0.2.0/24"},
		{"IPv4MappedNetwork", Grouping{By: ByAccount}, anon("::ffff:192.0.2.200"), "net:192.0.2.0/24"},
		{"IPv6Network", Grouping{By: ByAccount}, anon("2001:db8:1:2:3::9"), "net:2001:db8:1::/48"},
		{"NetworksAsSet", Grouping{By: ByAccount, IPv4Bits: 16, IPv6Bits: 64}, anon("192.0.2.7"), "net:192.0.0.0/16"},
		{"IPv6AsSet", Grouping{By: ByAccount, IPv4Bits: 16, IPv6Bits: 64}, anon("2001:db8:1:2:3::9"), "net:2001:db8:1:2::/64"},
		{"DefaultIsAccount", Grouping{}, key("k1", "acme", ""), "account:acme"},
		{"Tier", Grouping{By: ByTier}, key("k1", "acme", "gold"), "tier:gold"},
		{"AnonymousTier", Grouping{By: ByTier}, anon("192.0.2.7"), "tier:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.g.Name(tt.c); got != tt.want {
				t.Errorf("Name(%+v) = %q, want %q", tt.c, got, tt.want)
			}
		})
	}
}

// TestManyKeysOfOneAccount: a client spreading its calls over 100 keys
// of one account is weighed as one caller, so a light caller that comes
// after all of them is served first. Weighed by key, each of the 100 is a
// newcomer as light as it, and it is served last.
func TestManyKeysOfOneAccount(t *testing.T) {
	for _, tc := range []struct {
		by   string
		want int // where the light caller is served, of 101
	}{{ByAccount, 0}, {ByKey, 100}} {
		t.Run(tc.by, func(t *testing.T) {
			q, _ := newQueue(t, Settings{Slots: 1, MaxWait: time.Minute, MaxQueue: 1000})
			g := Grouping{By: tc.by}
			ctxOf := func(c Caller) context.Context { return as(g.Name(c), 1) }
			acme := func(i int) Caller { return Caller{Key: fmt.Sprintf("key:acme-%d", i), Account: "acme"} }
			use(t, q, ctxOf(acme(0)), 100*time.Millisecond) // the account has used the database
			var calls []call
			for i := 1; i <= 100; i++ {
				calls = append(calls, call{"acme", ctxOf(acme(i))})
			}
			calls = append(calls, call{"light", ctxOf(Caller{Key: "key:light"})})
			got := admissionOrder(t, q, 10*time.Millisecond, calls)
			if i := slices.Index(got, "light"); i != tc.want {
				t.Errorf("the light caller was served %d of %d, want %d", i, len(got), tc.want)
			}
		})
	}
}
