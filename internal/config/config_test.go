package config

import (
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	c, err := Load(env(map[string]string{
		"DATABASE_URL": "postgres://u@localhost/db",
		"REDIS_URL":    "redis://localhost:6379/0",
	}))
	if err != nil {
		t.Fatalf("Load() error = %v", err)
	}
	if c.Server.Port != 8000 {
		t.Errorf("Port = %d, want 8000", c.Server.Port)
	}
	if c.DB.QueryTimeout != 2*time.Second {
		t.Errorf("QueryTimeout = %v, want 2s", c.DB.QueryTimeout)
	}
	if !c.DB.MigrateOnStart {
		t.Errorf("MigrateOnStart = false, want true")
	}
	if c.Redis.Pipeline != 16 {
		t.Errorf("Redis.Pipeline = %d, want 16", c.Redis.Pipeline)
	}
}

func TestLoadNamesEveryBadSetting(t *testing.T) {
	_, err := Load(env(map[string]string{
		"DATABASE_URL":     "mysql://u@localhost/db",
		"REDIS_URL":        "redis://:topsecret@%zz",
		"PORT":             "70000",
		"DB_QUERY_TIMEOUT": "-1s",
		"LOG_LEVEL":        "loud",
		"MIGRATE_ON_START": "maybe",
		"REDIS_PIPELINE":   "0",
	}))
	if err == nil {
		t.Fatal("Load() = nil error, want one")
	}
	for _, want := range []string{"DATABASE_URL", "REDIS_URL", "PORT", "DB_QUERY_TIMEOUT", "LOG_LEVEL", "MIGRATE_ON_START", "REDIS_PIPELINE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Load() error lacks %s:\n%v", want, err)
		}
	}
	if strings.Contains(err.Error(), "topsecret") {
		t.Errorf("Load() error leaks a password:\n%v", err)
	}
}
