package access_test

import (
	"context"
	"testing"

	"github.com/geogate/geogate/internal/access"
	"github.com/geogate/geogate/internal/auth"
)

func TestCallerAndPartition(t *testing.T) {
	s := access.Settings{
		Layers: map[string]access.Rule{
			"sites": {AsCaller: true, CacheBy: "claim:tenant"},
			"roles": {AsCaller: true, CacheBy: access.CacheByRole},
			"fresh": {AsCaller: true},
			"plain": {},
		},
		CallerRoles: []string{"tenant_reader"},
	}
	key := auth.Identity{Kind: auth.KindKey, ID: "k1", DBRole: "tenant_reader", KeyClaims: []byte(`{"tenant":"acme"}`)}
	other := key
	other.ID, other.KeyClaims = "k2", []byte(`{"tenant":"umbrella"}`)
	noTenant := key
	noTenant.ID, noTenant.KeyClaims = "k3", nil
	outsider := key
	outsider.DBRole = "postgres"
	tests := []struct {
		name      string
		id        auth.Identity
		layer     string
		wantOK    bool
		wantErr   bool
		partition string
	}{
		{"PlainLayer", auth.Identity{Anonymous: true}, "plain", false, false, ""},
		{"ClaimPartition", key, "sites", true, false, `tenant_reader|"acme"`},
		{"OtherTenant", other, "sites", true, false, `tenant_reader|"umbrella"`},
		{"NoClaim", noTenant, "sites", true, false, "tenant_reader|null"},
		{"RolePartition", key, "roles", true, false, "tenant_reader"},
		{"NotCached", key, "fresh", true, false, access.NoCache},
		{"RoleNotAccepted", outsider, "sites", true, true, ""},
		{"NoRole", auth.Identity{Kind: auth.KindKey, ID: "k4"}, "sites", true, true, ""},
		{"Anonymous", auth.Identity{Anonymous: true}, "sites", true, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := auth.WithIdentity(context.Background(), tt.id)
			c, ok, err := s.Caller(ctx, "plain", tt.layer)
			if ok != tt.wantOK || (err != nil) != tt.wantErr {
				t.Fatalf("Caller = %+v, %v, %v; want ok %v, error %v", c, ok, err, tt.wantOK, tt.wantErr)
			}
			if err != nil || !ok {
				return
			}
			if c.Role != tt.id.DBRole || c.Key != tt.id.ID || c.Identity != "key:"+tt.id.ID {
				t.Errorf("Caller = %+v, want the key's role, id and identity", c)
			}
			if got := s.Partition(tt.layer, c); got != tt.partition {
				t.Errorf("Partition = %q, want %q", got, tt.partition)
			}
		})
	}
}
