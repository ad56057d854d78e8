package rdb

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseURL(t *testing.T) {
	type want struct {
		Addrs      []string
		DB         int
		Cluster    bool
		MasterName string
		Password   string
		TLS        bool
	}
	tests := []struct {
		name string
		url  string
		want want
	}{
		{"Single", "redis://127.0.0.1:6379/2", want{Addrs: []string{"127.0.0.1:6379"}, DB: 2}},
		{"SingleDefaultPort", "redis://cache", want{Addrs: []string{"cache:6379"}}},
		{"SingleTLSPassword", "rediss://:s3cret@cache:6380/0", want{Addrs: []string{"cache:6380"}, Password: "s3cret", TLS: true}},
		{"Cluster", "redis-cluster://a:7000,b:7001,c:7002", want{Addrs: []string{"a:7000", "b:7001", "c:7002"}, Cluster: true}},
		{"Sentinel", "redis-sentinel://s1:26379,s2:26379/mymaster?db=1", want{Addrs: []string{"s1:26379", "s2:26379"}, DB: 1, MasterName: "mymaster"}},
		{"UnixSocket", "unix://:s3cret@/run/redis/redis.sock?db=2", want{Addrs: []string{"/run/redis/redis.sock"}, DB: 2, Password: "s3cret"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := ParseURL(tt.url)
			if err != nil {
				t.Fatalf("ParseURL(%q) error = %v", tt.url, err)
			}
			got := want{Addrs: o.Addrs, DB: o.DB, Cluster: o.IsClusterMode, MasterName: o.MasterName, Password: o.Password, TLS: o.TLSConfig != nil}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseURL(%q) mismatch (-want +got):\n%s", tt.url, diff)
			}
		})
	}
}

func TestParseURLErrors(t *testing.T) {
	tests := []struct {
		name, url, wantErr string
	}{
		{"Scheme", "memcache://x:1", "scheme"},
		{"NoHost", "redis:///0", "no host"},
		{"BadPort", "redis://x:port", "port"},
		{"BadDB", "redis://x:6379/zero", "database"},
		{"SeveralHostsSingle", "redis://a:1,b:2", "redis-cluster"},
		{"SentinelWithoutMaster", "redis-sentinel://s1:26379", "master name"},
		{"UnixWithHost", "unix://host/run/redis.sock", "absolute path"},
		{"UnixBadDB", "unix:///run/redis.sock?db=x", "db"},
		{"PasswordNotEchoed", "redis://:hunter2@x:port", "port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseURL(tt.url)
			if err == nil {
				t.Fatalf("ParseURL(%q) = nil error, want one mentioning %q", tt.url, tt.wantErr)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseURL(%q) = %q, want it to mention %q", tt.url, err, tt.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("ParseURL(%q) error leaks the password: %q", tt.url, err)
			}
		})
	}
}
