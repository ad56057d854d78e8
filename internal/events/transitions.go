package events

import (
	"slices"
	"time"
)

// Kind is the kind of a transition.
type Kind string

// The kinds of event a subscription may ask for.
const (
	Enter Kind = "enter" // a device is first seen inside a fence
	Exit  Kind = "exit"  // a device is first seen outside a fence again
	Dwell Kind = "dwell" // a device has stayed inside a fence for the dwell time
	// Cross is a fence that the straight line between two consecutive
	// positions passes through, neither of them inside it.
	Cross Kind = "cross"
)

// Kinds lists every kind, in the order the docs give them.
var Kinds = []Kind{Enter, Exit, Dwell, Cross}

// stay is a device's time inside one fence.
type stay struct {
	since   time.Time
	dwelled bool // its dwell event was told
}

// sample is one position of a device as transitions see it: when, the
// fences holding it, and the fences the line from the device's previous
// position to it meets, each in ascending order.
type sample struct {
	at     time.Time
	inside []string
	met    []string
}

// change is one transition of a device and a fence.
type change struct {
	kind  Kind
	fence string
}

// step moves a device's stays on to sample s and returns the transitions
// it makes, crosses first, then exits, then enters, then dwells, each by
// fence. A fence crossed is one the line to s meets that the device was
// in neither before nor at s. A stay dwells once: at the first sample at
// least dwell after it began (dwell 0 never dwells). stays is changed in
// place.
func step(stays map[string]*stay, s sample, dwell time.Duration) []change {
	var out []change
	for _, f := range s.met {
		_, was := stays[f]
		if _, is := slices.BinarySearch(s.inside, f); !was && !is {
			out = append(out, change{Cross, f})
		}
	}
	for _, f := range sortedKeys(stays) {
		if _, in := slices.BinarySearch(s.inside, f); !in {
			delete(stays, f)
			out = append(out, change{Exit, f})
		}
	}
	for _, f := range s.inside {
		if _, ok := stays[f]; !ok {
			stays[f] = &stay{since: s.at}
			out = append(out, change{Enter, f})
		}
	}
	if dwell > 0 {
		for _, f := range s.inside {
			st := stays[f]
			if !st.dwelled && s.at.Sub(st.since) >= dwell {
				st.dwelled = true
				out = append(out, change{Dwell, f})
			}
		}
	}
	return out
}

func sortedKeys(m map[string]*stay) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
