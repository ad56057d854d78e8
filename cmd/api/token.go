package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/geogate/geogate/internal/auth"
	"github.com/geogate/geogate/internal/config"
)

// tokenCmd mints an HS256 development token with JWT_HS256_SECRET and
// prints it on stdout.
func tokenCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("sub", "", "subject, the caller's id (required)")
	scopes := fs.String("scopes", "", "comma-separated scopes, or all (required)")
	ttl := fs.Duration("ttl", 0, "lifetime, such as 1h (required)")
	tier := fs.String("tier", "", "rate tier claim")
	bbox := fs.String("bbox", "", "geo_scope claim minLng,minLat,maxLng,maxLat")
	scopeFile := fs.String("scope-geojson", "", "geo_scope claim from a file holding a GeoJSON Polygon or MultiPolygon")
	layers := fs.String("layers", "", "layers claim: comma-separated layer ids or patterns (default: no claim, every layer)")
	iss := fs.String("iss", "", "issuer claim (default: the first of JWT_ISSUER)")
	aud := fs.String("aud", "", "comma-separated audience claim (default: JWT_AUDIENCE)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *sub == "" || *scopes == "" || *ttl <= 0 {
		return errors.New("token: --sub, --scopes and a positive --ttl are required")
	}
	cfg, err := config.Load(getenv)
	if err != nil {
		return err
	}
	secret := cfg.Auth.JWTSecret
	if len(secret) < 32 {
		return errors.New("token: JWT_HS256_SECRET must be set to at least 32 characters (openssl rand -hex 32) and be the same for the service")
	}
	o := auth.MintOptions{Subject: *sub, Tier: *tier, TTL: *ttl, Issuer: *iss}
	if o.Scopes, err = parseScopes(*scopes); err != nil {
		return err
	}
	if o.Spatial, err = spatialFlags(*bbox, *scopeFile); err != nil {
		return err
	}
	if o.Layers, err = layersFlag(fs, *layers); err != nil {
		return err
	}
	if o.Issuer == "" && len(cfg.Auth.Issuers) > 0 {
		o.Issuer = cfg.Auth.Issuers[0]
	}
	o.Audience = cfg.Auth.Audiences
	if *aud != "" {
		o.Audience = strings.Split(*aud, ",")
	}
	tok, err := auth.MintHS256([]byte(secret), o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
