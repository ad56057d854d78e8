package main

import (
	"strings"
	"testing"
)

func TestGrewBeyond(t *testing.T) {
	third := memSample{heap: 12 << 20, sys: 80 << 20, goroutines: 50, fds: 80, rss: 350 << 20}
	tests := []struct {
		name string
		end  memSample
		want []string // the start of each complaint, in order
	}{
		{"flat", third, nil},
		{"within every margin", memSample{heap: 22 << 20, sys: 144 << 20, goroutines: 50 + soakGoroutineSlack, fds: 80 + soakFDSlack, rss: 900 << 20}, nil},
		{"heap", memSample{heap: 23 << 20, sys: 80 << 20, goroutines: 50, fds: 80}, []string{"live heap grew from 12 MB"}},
		{"runtime memory", memSample{heap: 12 << 20, sys: 145 << 20, goroutines: 50, fds: 80}, []string{"Go runtime memory grew from 80 MB"}},
		{"goroutines and files", memSample{heap: 12 << 20, sys: 80 << 20, goroutines: 51 + soakGoroutineSlack, fds: 81 + soakFDSlack},
			[]string{"goroutines grew from 50", "open files grew from 80"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := grewBeyond(third, tt.end)
			if len(got) != len(tt.want) {
				t.Fatalf("grewBeyond = %q, want %d complaints starting %q", got, len(tt.want), tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("complaint %d = %q, want it to start %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}
