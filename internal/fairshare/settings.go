package fairshare

import "time"

// Settings configure a Queue.
type Settings struct {
	// Slots is how many database calls may run at once; the pool size
	// is the natural choice, so that a caller holding a slot finds a
	// connection.
	Slots int
	// MaxWait bounds a caller's wait for a slot.
	MaxWait time.Duration
	// MaxQueue bounds how many callers may wait at once.
	MaxQueue int
	// HalfLife is how fast past use is forgotten: a second of database
	// time counts half as much HalfLife later.
	HalfLife time.Duration
	// Weights are the tiers' weights; a tier not listed weighs 1. An
	// identity of weight 2 is served as if it had used half what it did.
	Weights map[string]int
	// Group says whom the queue weighs as one identity.
	Group Grouping
	// Adaptive lets the queue admit fewer than Slots calls at once
	// while the database runs the same work more than Tolerance times
	// slower than it does unloaded, down to MinSlots (see limit.go).
	Adaptive  bool
	MinSlots  int
	Tolerance float64
}

// The defaults of the Settings left zero.
const (
	DefaultMaxWait  = time.Second
	DefaultHalfLife = 5 * time.Second
	// defaultQueuePerSlot sizes MaxQueue when it is not set.
	defaultQueuePerSlot = 64
	DefaultMinSlots     = 2
	DefaultTolerance    = 2.0
)

// Weight returns the weight of tier: its own, or 1.
func (s Settings) Weight(tier string) int {
	if w, ok := s.Weights[tier]; ok && w > 0 {
		return w
	}
	return 1
}

// withDefaults fills the Settings left zero.
func (s Settings) withDefaults() Settings {
	if s.Slots < 1 {
		s.Slots = 1
	}
	if s.MaxWait <= 0 {
		s.MaxWait = DefaultMaxWait
	}
	if s.MaxQueue < 1 {
		s.MaxQueue = defaultQueuePerSlot * s.Slots
	}
	if s.HalfLife <= 0 {
		s.HalfLife = DefaultHalfLife
	}
	if s.MinSlots < 1 {
		s.MinSlots = DefaultMinSlots
	}
	s.MinSlots = min(s.MinSlots, s.Slots)
	if s.Tolerance <= 1 {
		s.Tolerance = DefaultTolerance
	}
	return s
}
