package admin

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/spatial"
	"github.com/geogate/geogate/internal/testenv"
)

var (
	operator = Actor{Kind: auth.KindKey, ID: "ops", Client: "192.0.2.7"}
	shell    = Actor{Kind: KindCLI, ID: "alice"}
)

// newService returns a Service on a fresh database and the ids its
// OnChange was called with.
func newService(t *testing.T, policies ...string) (*Service, *[]string) {
	t.Helper()
	var changed []string
	var known func() []string
	if policies != nil {
		known = func() []string { return policies }
	}
	s := New(testenv.DB(t), Options{Policies: known, OnChange: func(id string) { changed = append(changed, id) }})
	return s, &changed
}

// TestServiceRecordsEveryChange walks a key through create, update,
// rotate and revoke: each is recorded with who, from where and what
// changed (and nothing that did not), never a secret; OnChange hears of
// each after it commits.
func TestServiceRecordsEveryChange(t *testing.T) {
	ctx := context.Background()
	s, changed := newService(t, "geofence", "tiles")
	exp := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)

	k, first, err := s.Create(ctx, operator, auth.CreateOptions{Key: auth.Key{
		ID: "acme", Scopes: []string{auth.ScopeTilesRead}, Notes: "first", ExpiresAt: &exp,
		Overrides: map[string]string{"geofence": "600/1m, 10/1s"},
	}})
	if err != nil {
		t.Fatalf("Create() = %v", err)
	}
	if !strings.HasPrefix(first, "gg_acme_") || k.ID != "acme" || k.Overrides["geofence"] != "10/1s,600/1m" {
		t.Errorf("Create() = %+v, %q; want acme, a gg_acme_ secret, overrides in canonical form", k, first)
	}
	box, _ := spatial.NewBBox(13, 52, 14, 53)
	if _, err := s.Update(ctx, shell, "acme", Change{
		Notes: Some("second"), Scopes: Some([]string{auth.ScopeTilesRead, auth.ScopeAdmin}), Tier: Some("gold"), Spatial: Some(box),
		ExpiresAt: Some(&exp), // unchanged: not recorded
	}); err != nil {
		t.Fatalf("Update() = %v", err)
	}
	_, second, err := s.Rotate(ctx, operator, "acme", time.Hour)
	if err != nil {
		t.Fatalf("Rotate() = %v", err)
	}
	revoked, err := s.Revoke(ctx, operator, "acme")
	if err != nil || revoked.RevokedAt == nil {
		t.Fatalf("Revoke() = %+v, %v; want revoked", revoked, err)
	}

	entries, more, err := s.Audit(ctx, AuditQuery{KeyID: "acme"})
	if err != nil || more {
		t.Fatalf("Audit() = %d entries, more %v, %v", len(entries), more, err)
	}
	type row struct {
		Kind, ID, Action, Client string
		Fields                   []string
	}
	var got []row
	for _, e := range entries {
		var ch map[string]any
		if err := json.Unmarshal(e.Changes, &ch); err != nil {
			t.Fatal(err)
		}
		r := row{Kind: e.Actor.Kind, ID: e.Actor.ID, Action: e.Action}
		if e.Client != nil {
			r.Client = *e.Client
		}
		for f := range ch {
			r.Fields = append(r.Fields, f)
		}
		slices.Sort(r.Fields)
		got = append(got, r)
		for _, secret := range []string{first, second} {
			h := auth.HashSecret(secret)
			if strings.Contains(string(e.Changes), secret) || strings.Contains(string(e.Changes), hex.EncodeToString(h[:])) {
				t.Errorf("entry %d (%s) holds a secret or its hash: %s", e.ID, e.Action, e.Changes)
			}
		}
	}
	want := []row{
		{"key", "ops", ActionRevoke, "192.0.2.7", []string{"revoked_at"}},
		{"key", "ops", ActionRotate, "192.0.2.7", []string{"grace", "previous_secret_until"}},
		{"cli", "alice", ActionUpdate, "", []string{"notes", "scopes", "spatial_scope", "tier"}},
		{"key", "ops", ActionCreate, "192.0.2.7", []string{"account", "claims", "db_role", "expires_at", "layers", "notes", "overrides", "revoked_at", "scopes", "spatial_scope", "tier"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit trail, newest first (-want +got):\n%s", diff)
	}
	var update struct {
		Notes struct{ From, To string } `json:"notes"`
	}
	if err := json.Unmarshal(entries[2].Changes, &update); err != nil || update.Notes.From != "first" || update.Notes.To != "second" {
		t.Errorf("update entry %s, want notes from first to second", entries[2].Changes)
	}
	if diff := cmp.Diff([]string{"acme", "acme", "acme", "acme"}, *changed); diff != "" {
		t.Errorf("OnChange calls (-want +got):\n%s", diff)
	}
}

// TestServiceCreateReplace: creating over an existing key needs Replace,
// which is recorded as a replace; a refused create records nothing.
func TestServiceCreateReplace(t *testing.T) {
	ctx := context.Background()
	s, changed := newService(t)
	o := auth.CreateOptions{Key: auth.Key{ID: "demo", Scopes: auth.AllScopes}, Secret: "demo"}
	if _, _, err := s.Create(ctx, shell, o); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Create(ctx, shell, o); !errors.Is(err, auth.ErrKeyExists) {
		t.Errorf("Create(existing) = %v, want ErrKeyExists", err)
	}
	o.Replace = true
	if _, secret, err := s.Create(ctx, shell, o); err != nil || secret != "demo" {
		t.Fatalf("Create(Replace) = %q, %v", secret, err)
	}
	entries, _, err := s.Audit(ctx, AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, e := range entries {
		actions = append(actions, e.Action)
	}
	if diff := cmp.Diff([]string{ActionReplace, ActionCreate}, actions); diff != "" {
		t.Errorf("actions, newest first (-want +got):\n%s", diff)
	}
	if len(*changed) != 2 {
		t.Errorf("OnChange calls = %q, want two: the refused create changed nothing", *changed)
	}
}

// TestServiceValidation: every bad value is a 422-shaped error naming
// the field, and nothing is stored or recorded.
func TestServiceValidation(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t, "geofence")
	past := time.Now().Add(-time.Hour)
	good := auth.Key{ID: "good", Scopes: []string{auth.ScopeTilesRead}}
	with := func(f func(*auth.Key)) auth.Key { k := good; f(&k); return k }
	for _, tc := range []struct {
		name    string
		key     auth.Key
		wantLoc []any
	}{
		{"BadID", with(func(k *auth.Key) { k.ID = "a b" }), []any{"body", "id"}},
		{"NoScopes", with(func(k *auth.Key) { k.Scopes = nil }), []any{"body", "scopes"}},
		{"UnknownScope", with(func(k *auth.Key) { k.Scopes = []string{"tiles:read", "root"} }), []any{"body", "scopes", 1}},
		{"ScopeTwice", with(func(k *auth.Key) { k.Scopes = []string{"admin", "admin"} }), []any{"body", "scopes", 1}},
		{"BadTier", with(func(k *auth.Key) { k.Tier = "gold plated" }), []any{"body", "tier"}},
		{"LongNotes", with(func(k *auth.Key) { k.Notes = strings.Repeat("n", maxNotes+1) }), []any{"body", "notes"}},
		{"NULInNotes", with(func(k *auth.Key) { k.Notes = "a\x00b" }), []any{"body", "notes"}},
		{"ExpiredAlready", with(func(k *auth.Key) { k.ExpiresAt = &past }), []any{"body", "expires_at"}},
		{"NoLayers", with(func(k *auth.Key) { k.Layers = []string{} }), []any{"body", "layers"}},
		{"UnknownPolicy", with(func(k *auth.Key) { k.Overrides = map[string]string{"nope": "10/1s"} }), []any{"body", "overrides", "nope"}},
		{"BadWindows", with(func(k *auth.Key) { k.Overrides = map[string]string{"geofence": "ten per second"} }), []any{"body", "overrides", "geofence"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Create(ctx, operator, auth.CreateOptions{Key: tc.key})
			var v *apperr.ValidationError
			if !errors.As(err, &v) || len(v.Fields) == 0 {
				t.Fatalf("Create() = %v, want a ValidationError", err)
			}
			if diff := cmp.Diff(tc.wantLoc, v.Fields[0].Loc); diff != "" {
				t.Errorf("loc (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("UpdateChecksOnlyWhatItSets", func(t *testing.T) {
		if _, _, err := s.Create(ctx, operator, auth.CreateOptions{Key: good}); err != nil {
			t.Fatal(err)
		}
		var v *apperr.ValidationError
		if _, err := s.Update(ctx, operator, "good", Change{Scopes: Some([]string{})}); !errors.As(err, &v) {
			t.Errorf("Update(no scopes) = %v, want a ValidationError", err)
		}
		if _, err := s.Update(ctx, operator, "good", Change{Overrides: Some(map[string]string{"geofence": "5/1s"})}); err != nil {
			t.Errorf("Update(overrides) = %v, want nil", err)
		}
	})
	entries, _, err := s.Audit(ctx, AuditQuery{})
	if err != nil || len(entries) != 2 {
		t.Errorf("audit entries = %d (%v), want the create and the update that passed", len(entries), err)
	}
}

// TestServiceRefusals: unknown keys are NotFound for every action, a
// revoked key cannot be rotated, and a grace period is bounded.
func TestServiceRefusals(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	if _, _, err := s.Create(ctx, operator, auth.CreateOptions{Key: auth.Key{ID: "k", Scopes: auth.AllScopes}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want apperr.Kind
	}{
		{"GetMissing", func() error { _, err := s.Get(ctx, "missing"); return err }, apperr.NotFound},
		{"UpdateMissing", func() error { _, err := s.Update(ctx, operator, "missing", Change{Notes: Some("x")}); return err }, apperr.NotFound},
		{"RevokeMissing", func() error { _, err := s.Revoke(ctx, operator, "missing"); return err }, apperr.NotFound},
		{"RotateMissing", func() error { _, _, err := s.Rotate(ctx, operator, "missing", time.Hour); return err }, apperr.NotFound},
		{"GraceTooLong", func() error { _, _, err := s.Rotate(ctx, operator, "k", MaxGrace+time.Second); return err }, apperr.Invalid},
		{"GraceNegative", func() error { _, _, err := s.Rotate(ctx, operator, "k", -time.Second); return err }, apperr.Invalid},
		{"RevokeTwice", func() error {
			if _, err := s.Revoke(ctx, operator, "k"); err != nil {
				return err
			}
			_, err := s.Revoke(ctx, operator, "k")
			return err
		}, -1},
		{"RotateRevoked", func() error { _, _, err := s.Rotate(ctx, operator, "k", time.Hour); return err }, apperr.Conflict},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			var v *apperr.ValidationError
			got := apperr.KindOf(err)
			switch {
			case errors.As(err, &v):
				got = apperr.Invalid
			case err == nil:
				got = -1
			}
			if got != tc.want {
				t.Errorf("%s: %v (kind %d), want kind %d", tc.name, err, got, tc.want)
			}
		})
	}
}

// TestAuditPages: pages come newest first, each link continuing where
// the last ended, and key_id keeps one key's entries.
func TestAuditPages(t *testing.T) {
	ctx := context.Background()
	s, _ := newService(t)
	for _, id := range []string{"a", "b", "a", "b", "a"} {
		if _, _, err := s.Create(ctx, operator, auth.CreateOptions{Key: auth.Key{ID: id, Scopes: auth.AllScopes}, Replace: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		q     AuditQuery
		pages [][]string // key ids, page by page
	}{
		{"All", AuditQuery{Limit: 2}, [][]string{{"a", "b"}, {"a", "b"}, {"a"}}},
		{"OneKey", AuditQuery{KeyID: "a", Limit: 2}, [][]string{{"a", "a"}, {"a"}}},
		{"OtherKey", AuditQuery{KeyID: "b"}, [][]string{{"b", "b"}}},
		{"NoSuchKey", AuditQuery{KeyID: "c"}, [][]string{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			var got [][]string
			var last int64 = 1 << 62
			for {
				entries, more, err := s.Audit(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, e := range entries {
					if e.ID >= last {
						t.Errorf("entry %d after %d: not newest first", e.ID, last)
					}
					last = e.ID
					ids = append(ids, *e.KeyID)
				}
				got = append(got, ids)
				if !more {
					break
				}
				q.Before = entries[len(entries)-1].ID
			}
			if diff := cmp.Diff(tc.pages, got); diff != "" {
				t.Errorf("pages (-want +got):\n%s", diff)
			}
		})
	}
}
