package main

import (
	"os"
	"testing"

	"github.com/geogate/geogate/internal/testenv"
)

func TestMain(m *testing.M) {
	if os.Getenv(apiProcessEnv) == "1" {
		// A process of launchProcess: main as the api binary runs it
		// (signals, settings from the environment, exit status).
		os.Args = os.Args[:1]
		main()
		os.Exit(0)
	}
	code := m.Run()
	testenv.StopRedisCluster()
	os.Exit(code)
}
