// Command api is the geogate service and its tools: serve (the default),
// migrate, import, keys, token, publish and simulate.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

const usage = `usage: api [command] [flags]

commands:
  serve     run the HTTP service (the default)
  migrate   apply database migrations and exit
  import    load a GeoJSON, newline-delimited GeoJSON or cities JSON file into a layer
  keys      create, list or revoke API keys (api keys create|list|revoke)
  publish   list the published layers; install or remove exact tile invalidation
  token     mint an HS256 development token (api token --sub ID --scopes ... --ttl 1h)
  simulate  move a small simulated fleet across the demo countries' borders (api simulate --url URL --key KEY)

Run 'api COMMAND -h' for a command's flags. Settings come from the
environment; docs/configuration.md lists them all.
`

// run dispatches to a subcommand. It returns instead of exiting so that
// tests can drive the whole program.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stdout, stderr)
	case "migrate":
		return migrate(ctx, args, getenv, stdout, stderr)
	case "import":
		return importCmd(ctx, args, getenv, stdout, stderr)
	case "keys":
		return keysCmd(ctx, args, getenv, stdout, stderr)
	case "token":
		return tokenCmd(ctx, args, getenv, stdout, stderr)
	case "publish":
		return publishCmd(ctx, args, getenv, stdout, stderr)
	case "simulate":
		return simulateCmd(ctx, args, getenv, stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}
