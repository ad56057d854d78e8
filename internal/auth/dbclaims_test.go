package auth

import (
	"encoding/json"
	"testing"
	"time"
)

func TestTokenRoleClaim(t *testing.T) {
	tv, err := NewTokenVerifier(TokenOptions{HS256Secret: []byte(testSecret), RoleClaim: "db_role"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		claims   map[string]any
		wantRole string
		wantErr  bool
	}{
		{"Absent", map[string]any{"tenant": "a"}, "", false},
		{"Null", map[string]any{"db_role": nil}, "", false},
		{"Named", map[string]any{"db_role": "tenant_reader", "tenant": "a"}, "tenant_reader", false},
		{"OtherClaimIgnored", map[string]any{"role": "tenant_reader"}, "", false},
		{"NotAString", map[string]any{"db_role": 7}, "", true},
		{"NotARoleName", map[string]any{"db_role": "Tenant Reader"}, "", true},
		{"Quoted", map[string]any{"db_role": `x"; DROP TABLE t; --`}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok, err := MintHS256([]byte(testSecret), MintOptions{Subject: "u", TTL: time.Hour, Claims: tt.claims})
			if err != nil {
				t.Fatal(err)
			}
			id, err := tv.Verify(tok)
			if (err != nil) != tt.wantErr || id.DBRole != tt.wantRole {
				t.Fatalf("Verify: role %q, err %v; want %q, error %v", id.DBRole, err, tt.wantRole, tt.wantErr)
			}
			if err != nil {
				return
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(id.ClaimsJSON()), &got); err != nil || got["sub"] != "u" {
				t.Errorf("ClaimsJSON = %s, %v; want the token's claims, sub u", id.ClaimsJSON(), err)
			}
		})
	}
}

// TestKeyClaims: what a key's policies read holds its own claims and,
// over them, what geogate knows of the key.
func TestKeyClaims(t *testing.T) {
	k := Key{ID: "acme-1", DBRole: "tenant_reader", Tier: "gold", DBClaims: json.RawMessage(`{"tenant":"acme","region":"eu"}`)}
	var got map[string]any
	if err := json.Unmarshal([]byte(keyClaims(k)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"tenant": "acme", "region": "eu", "sub": "key:acme-1", "key": "acme-1", "role": "tenant_reader", "tier": "gold"}
	if len(got) != len(want) {
		t.Errorf("keyClaims = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("keyClaims[%s] = %v, want %v", k, got[k], v)
		}
	}
	for _, tt := range []struct {
		raw string
		ok  bool
	}{
		{`{"tenant":"acme"}`, true}, {`{}`, true}, {`{"sub":"key:other"}`, false}, {`{"role":"postgres"}`, false},
		{`{"account":"x"}`, false}, {`[1]`, false}, {`"x"`, false}, {`null`, false}, {`{"a":"` + string(make([]byte, MaxClaims)) + `"}`, false},
	} {
		if err := CheckKeyClaims(json.RawMessage(tt.raw)); (err == nil) != tt.ok {
			t.Errorf("CheckKeyClaims(%.40s) = %v, want ok %v", tt.raw, err, tt.ok)
		}
	}
}
