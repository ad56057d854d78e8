package delivery

import (
	"testing"
	"time"
)

// TestSignatureStandardWebhooks: the Standard Webhooks specification's
// own example signs as the specification says.
func TestSignatureStandardWebhooks(t *testing.T) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	got := Signature([]string{secret}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if want := "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="; got != want {
		t.Errorf("Signature() = %q, want %q", got, want)
	}
}

func TestSignatureBothSecrets(t *testing.T) {
	a, b := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_c2Vjb25kIHNlY3JldCBmb3IgdGVzdHM="
	both := Signature([]string{a, b}, "id", 1, []byte("{}"))
	want := Signature([]string{a}, "id", 1, []byte("{}")) + " " + Signature([]string{b}, "id", 1, []byte("{}"))
	if both != want {
		t.Errorf("Signature(two secrets) = %q, want %q", both, want)
	}
	if got := Signature([]string{"whsec_!!"}, "id", 1, nil); got != "" {
		t.Errorf("Signature(unreadable secret) = %q, want none", got)
	}
}

func TestBackoffBounds(t *testing.T) {
	least, most := 100*time.Millisecond, 10*time.Second
	tests := []struct {
		attempt int
		ceiling time.Duration
	}{
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{8, 10 * time.Second}, // 12.8s, capped
		{64, 10 * time.Second},
		{0, 10 * time.Second},
	}
	for _, tc := range tests {
		var spread time.Duration
		for range 200 {
			got := backoff(tc.attempt, least, most)
			if got <= 0 || got > tc.ceiling+time.Millisecond {
				t.Fatalf("backoff(%d) = %v, want in (0, %v]", tc.attempt, got, tc.ceiling)
			}
			spread = max(spread, got)
		}
		// Full jitter: 200 draws reach well past half the ceiling.
		if spread < tc.ceiling/2 {
			t.Errorf("backoff(%d): largest of 200 draws %v, want jitter over (0, %v]", tc.attempt, spread, tc.ceiling)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"-1", 0},
		{"soon", 0},
		{"Mon, 01 Jun 2026 12:00:30 GMT", 30 * time.Second},
		{"Mon, 01 Jun 2026 11:00:00 GMT", 0}, // past
	}
	for _, tc := range tests {
		if got := retryAfter(tc.header, now); got != tc.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tc.header, got, tc.want)
		}
	}
}
