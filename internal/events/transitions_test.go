package events

import (
	"fmt"
	"testing"
	"time"
)

func TestStep(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name    string
		dwell   time.Duration
		samples []sample
		want    string
	}{
		{"outside stays quiet", 0, []sample{{at: at(0)}, {at: at(1)}}, "[] []"},
		{"enter then exit", 0, []sample{{at: at(0), inside: []string{"a"}}, {at: at(1)}}, "[{enter a}] [{exit a}]"},
		{"inside twice enters once", 0, []sample{{at: at(0), inside: []string{"a"}}, {at: at(1), inside: []string{"a"}}}, "[{enter a}] []"},
		{"move from a to b exits first", 0, []sample{{at: at(0), inside: []string{"a"}}, {at: at(1), inside: []string{"b"}}}, "[{enter a}] [{exit a} {enter b}]"},
		{"overlapping fences by key", 0, []sample{{at: at(0), inside: []string{"a", "b"}}, {at: at(1), inside: []string{"b"}}}, "[{enter a} {enter b}] [{exit a}]"},
		{"dwell once per stay", 10 * time.Second, []sample{
			{at: at(0), inside: []string{"a"}}, {at: at(9), inside: []string{"a"}}, {at: at(10), inside: []string{"a"}}, {at: at(30), inside: []string{"a"}}, {at: at(31)}, {at: at(32), inside: []string{"a"}},
		}, "[{enter a}] [] [{dwell a}] [] [{exit a}] [{enter a}]"},
		{"dwell on the sample that passes it", 10 * time.Second, []sample{{at: at(0), inside: []string{"a"}}, {at: at(60), inside: []string{"a"}}}, "[{enter a}] [{dwell a}]"},
		{"a fence passed through is crossed", 0, []sample{{at: at(0)}, {at: at(1), met: []string{"a", "b"}, inside: []string{"b"}}}, "[] [{cross a} {enter b}]"},
		{"a fence left or stayed in is not crossed", 0, []sample{{at: at(0), inside: []string{"a"}}, {at: at(1), met: []string{"a"}}, {at: at(2), inside: []string{"a"}}, {at: at(3), met: []string{"a"}, inside: []string{"a"}}},
			"[{enter a}] [{exit a}] [{enter a}] []"},
		{"no dwell without a dwell time", 0, []sample{{at: at(0), inside: []string{"a"}}, {at: at(3600), inside: []string{"a"}}}, "[{enter a}] []"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stays := map[string]*stay{}
			var got []string
			for _, s := range tt.samples {
				cs := step(stays, s, tt.dwell)
				if cs == nil {
					cs = []change{}
				}
				got = append(got, fmt.Sprint(cs))
			}
			if g := fmt.Sprint(joinSpace(got)); g != tt.want {
				t.Errorf("got %s, want %s", g, tt.want)
			}
		})
	}
}

func joinSpace(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += " "
		}
		out += s
	}
	return out
}
