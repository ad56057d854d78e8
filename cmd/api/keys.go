package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/geogate/geogate/internal/admin"
	"github.com/geogate/geogate/internal/apperr"
	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/config"
	"github.com/geogate/geogate/internal/spatial"
)

const keysUsage = `usage: api keys create --name ID --scopes SCOPES [flags]
       api keys list
       api keys revoke ID
       api keys rotate [--grace 24h] ID
       api keys audit [--key ID] [--limit 100]

Scopes: proximity:read, geofences:read, geofences:write, tiles:read, features:read, features:write, positions:write, events:read, events:write, admin, or all.
Run 'api keys create -h' for the flags of create.
`

// keysCmd manages API keys through the admin service the /admin/ routes
// use, each change recorded in the audit trail as done by the CLI and the
// operating-system user: create and rotate print a secret once, list never
// shows secrets, a revocation reaches running services at once (within
// API_KEY_CACHE_TTL while one cannot hear the database).
func keysCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, keysUsage)
		return errors.New("keys: a subcommand is required")
	}
	sub, args := args[0], args[1:]
	switch sub {
	case "create":
		return keysCreate(ctx, args, getenv, stdout, stderr)
	case "list":
		return keysList(ctx, args, getenv, stdout, stderr)
	case "revoke":
		return keysRevoke(ctx, args, getenv, stdout, stderr)
	case "rotate":
		return keysRotate(ctx, args, getenv, stdout, stderr)
	case "audit":
		return keysAudit(ctx, args, getenv, stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, keysUsage)
		return nil
	}
	fmt.Fprint(stderr, keysUsage)
	return fmt.Errorf("keys: unknown subcommand %q", sub)
}

func keysCreate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys create", flag.ContinueOnError)
	fs.SetOutput(stderr)
	name := fs.String("name", "", "public key id: letters, digits, '_', '.', '-' (required)")
	scopes := fs.String("scopes", "", "comma-separated scopes, or all (required)")
	tier := fs.String("tier", "", "rate tier")
	account := fs.String("account", "", "the client the key belongs to: its keys share one fair share of the database")
	dbRole := fs.String("db-role", "", "the database role the key's requests run as on layers that run as their caller (one of DB_CALLER_ROLES)")
	claims := fs.String("claims", "", `the key's claims, a JSON object, read by those layers' policies in request.jwt.claims, such as {"tenant":"acme"}`)
	expires := fs.Duration("expires", 0, "lifetime, such as 720h (default: never expires)")
	bbox := fs.String("bbox", "", "spatial scope minLng,minLat,maxLng,maxLat")
	scopeFile := fs.String("scope-geojson", "", "spatial scope: file holding a GeoJSON Polygon or MultiPolygon")
	layers := fs.String("layers", "", "comma-separated layer ids or patterns such as transit__* the key may read (default: every layer)")
	notes := fs.String("notes", "", "free text shown by list")
	secret := fs.String("secret", "", "use this secret instead of a random one (development only)")
	replace := fs.Bool("replace", false, "update the key if it exists (new secret, scopes, tier, scope, layers, expiry; un-revokes it)")
	ifMissing := fs.Bool("if-missing", false, "do nothing if a key with this id exists")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *name == "" || *scopes == "" {
		return errors.New("keys create: --name and --scopes are required")
	}
	k := auth.Key{ID: *name, Tier: *tier, Account: *account, Notes: *notes, DBRole: *dbRole}
	if k.Account != "" && !auth.ValidAccount(k.Account) {
		return errors.New("keys create: --account is 1 to 64 letters, digits, '_', '.', ':' or '-', starting with a letter or digit")
	}
	if k.DBRole != "" && !auth.ValidRole(k.DBRole) {
		return errors.New("keys create: --db-role is a lower-case role name: letters, digits and _")
	}
	if *claims != "" {
		if err := auth.CheckKeyClaims(json.RawMessage(*claims)); err != nil {
			return fmt.Errorf("keys create: --claims: %w", err)
		}
		k.DBClaims = json.RawMessage(*claims)
	}
	var err error
	if k.Scopes, err = parseScopes(*scopes); err != nil {
		return err
	}
	if k.Spatial, err = spatialFlags(*bbox, *scopeFile); err != nil {
		return err
	}
	if k.Layers, err = layersFlag(fs, *layers); err != nil {
		return err
	}
	if *expires < 0 {
		return errors.New("keys create: --expires must be positive")
	}
	if *expires > 0 {
		t := time.Now().Add(*expires).UTC()
		k.ExpiresAt = &t
	}
	if *secret != "" {
		fmt.Fprintln(stderr, "warning: --secret chooses a guessable secret; use it for development only")
	}
	return withAdmin(ctx, getenv, func(s *admin.Service, a admin.Actor) error {
		_, got, err := s.Create(ctx, a, auth.CreateOptions{Key: k, Secret: *secret, Replace: *replace})
		if *ifMissing && errors.Is(err, auth.ErrKeyExists) {
			fmt.Fprintf(stdout, "key %s already exists; left as it is\n", k.ID)
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created key %s with scopes %s on layers %s; the secret is shown only now:\n", k.ID, strings.Join(k.Scopes, ","), layersText(k.Layers))
		fmt.Fprintln(stdout, got)
		return nil
	})
}

func keysList(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys list", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	return withAdmin(ctx, getenv, func(s *admin.Service, _ admin.Actor) error {
		keys, err := s.List(ctx)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tSTATUS\tSCOPES\tTIER\tSPATIAL\tLAYERS\tCREATED\tEXPIRES\tNOTES")
		now := time.Now()
		for _, k := range keys {
			status := admin.Status(k, now)
			exp := "never"
			if k.ExpiresAt != nil {
				exp = k.ExpiresAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, status, strings.Join(k.Scopes, ","), dash(k.Tier),
				spatialText(k), layersText(k.Layers), k.CreatedAt.UTC().Format(time.RFC3339), exp, strconv.Quote(k.Notes))
		}
		return w.Flush()
	})
}

func keysRevoke(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys revoke", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("keys revoke: exactly one key id is required")
	}
	id := fs.Arg(0)
	return withAdmin(ctx, getenv, func(s *admin.Service, a admin.Actor) error {
		if _, err := s.Revoke(ctx, a, id); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked key %s (running services stop accepting it at once, or within API_KEY_CACHE_TTL if one cannot hear the database)\n", id)
		return nil
	})
}

func keysRotate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys rotate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	grace := fs.Duration("grace", admin.DefaultGrace, "how long the old secret keeps working, at most "+admin.MaxGrace.String()+" (0: stops at once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("keys rotate: exactly one key id is required")
	}
	id := fs.Arg(0)
	return withAdmin(ctx, getenv, func(s *admin.Service, a admin.Actor) error {
		k, secret, err := s.Rotate(ctx, a, id, *grace)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "rotated key %s; the old secret works until %s; the new secret is shown only now:\n",
			k.ID, k.PreviousSecretUntil.UTC().Format(time.RFC3339))
		fmt.Fprintln(stdout, secret)
		return nil
	})
}

func keysAudit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys audit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	key := fs.String("key", "", "only the entries of this key id")
	limit := fs.Int("limit", admin.DefaultAuditLimit, fmt.Sprintf("at most this many entries, newest first (1 to %d)", admin.MaxAuditLimit))
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return errors.New("keys audit: no arguments; use --key ID")
	}
	if *limit < 1 || *limit > admin.MaxAuditLimit {
		return fmt.Errorf("keys audit: --limit must be from 1 to %d", admin.MaxAuditLimit)
	}
	return withAdmin(ctx, getenv, func(s *admin.Service, _ admin.Actor) error {
		entries, _, err := s.Audit(ctx, admin.AuditQuery{KeyID: *key, Limit: *limit})
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tAT\tWHO\tFROM\tACTION\tSUBJECT\tCHANGES")
		for _, e := range entries {
			from := "-"
			if e.Client != nil {
				from = *e.Client
			}
			subject := "-"
			switch {
			case e.KeyID != nil:
				subject = *e.KeyID
			case e.Tier != nil:
				subject = "tier " + *e.Tier
			}
			fmt.Fprintf(w, "%d\t%s\t%s:%s\t%s\t%s\t%s\t%s\n", e.ID, e.At.UTC().Format(time.RFC3339), e.Actor.Kind, e.Actor.ID,
				from, e.Action, subject, e.Changes)
		}
		return w.Flush()
	})
}

// withAdmin opens the database named by DATABASE_URL for one command and
// hands f the admin service on it and the actor the CLI records: cli and
// the operating-system user.
func withAdmin(ctx context.Context, getenv func(string) string, f func(*admin.Service, admin.Actor) error) error {
	cfg, err := config.Load(getenv, config.NeedPostgres)
	if err != nil {
		return err
	}
	pool, err := openCLIPool(ctx, cfg, "geogate-keys")
	if err != nil {
		return err
	}
	defer pool.Close()
	svc := admin.New(pool, admin.Options{Policies: func() []string { return slices.Sorted(maps.Keys(cfg.RateLimit)) }})
	return cliError(f(svc, admin.Actor{Kind: admin.KindCLI, ID: osUser(getenv)}))
}

// osUser names who runs the command: the operating-system user, else
// $USER, else "unknown".
func osUser(getenv func(string) string) string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := getenv("USER"); u != "" {
		return u
	}
	return "unknown"
}

// cliError turns store errors into messages for a terminal.
func cliError(err error) error {
	var (
		pe *pgconn.PgError
		ve *apperr.ValidationError
	)
	switch {
	case err == nil:
		return nil
	case errors.As(err, &pe) && pe.Code == "42P01":
		return errors.New("a table of geogate's is missing: run 'api migrate' first")
	case errors.As(err, &ve):
		var msgs []string
		for _, f := range ve.Fields {
			var where []string
			for _, l := range f.Loc {
				if l != "body" {
					where = append(where, fmt.Sprint(l))
				}
			}
			msgs = append(msgs, strings.Join(where, ".")+": "+f.Msg)
		}
		return errors.New(strings.Join(msgs, "; "))
	case apperr.KindOf(err) != apperr.Internal:
		return errors.New(apperr.MessageOf(err))
	}
	return err
}

func parseScopes(s string) ([]string, error) {
	if s == "all" {
		return slices.Clone(auth.AllScopes), nil
	}
	var out []string
	for _, sc := range strings.Split(s, ",") {
		sc = strings.TrimSpace(sc)
		if sc == "" {
			continue
		}
		if !slices.Contains(auth.AllScopes, sc) {
			return nil, fmt.Errorf("unknown scope %q (known: %s, or all)", sc, strings.Join(auth.AllScopes, ", "))
		}
		if !slices.Contains(out, sc) {
			out = append(out, sc)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("at least one scope is required")
	}
	return out, nil
}

// spatialFlags reads --bbox or --scope-geojson; neither is the whole world.
func spatialFlags(bbox, file string) (*spatial.Scope, error) {
	switch {
	case bbox != "" && file != "":
		return nil, errors.New("use --bbox or --scope-geojson, not both")
	case bbox != "":
		parts := strings.Split(bbox, ",")
		if len(parts) != 4 {
			return nil, errors.New("--bbox must be minLng,minLat,maxLng,maxLat")
		}
		var v [4]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("--bbox: %q is not a number", p)
			}
			v[i] = f
		}
		return spatial.NewBBox(v[0], v[1], v[2], v[3])
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		s, err := spatial.Parse(data)
		if err == nil && s == nil {
			err = errors.New("--scope-geojson: the file holds no geometry")
		}
		return s, err
	}
	return nil, nil
}

// layersFlag reads --layers: nil, every layer, when the flag is not
// given; otherwise the entries, trimmed, without empty ones or repeats, as
// --scopes is read, and checked before any database is opened. A flag
// given but naming nothing is refused, not taken for every layer.
func layersFlag(fs *flag.FlagSet, v string) ([]string, error) {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "layers" })
	if !given {
		return nil, nil
	}
	out := []string{}
	for _, l := range strings.Split(v, ",") {
		l = strings.TrimSpace(l)
		if l != "" && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("--layers needs at least one layer id or pattern; leave it out for every layer")
	}
	return out, auth.ValidateLayers(out)
}

// layersText is a key's layers in a listing.
func layersText(layers []string) string {
	if layers == nil {
		return "all"
	}
	return strings.Join(layers, ",")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// spatialText is a key's spatial scope for keys list: "world", its JSON,
// or the JSON stored and why it is refused.
func spatialText(k auth.Key) string {
	raw := k.SpatialJSON()
	switch {
	case raw == nil:
		return "world"
	case k.InvalidSpatial != nil:
		return string(raw) + " (invalid: " + k.InvalidSpatial.Reason + ")"
	}
	return string(raw)
}
