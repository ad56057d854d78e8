package outbox

// The outbox announces what it appends (migrations 00015 and 00022).
const (
	// EventsChannel hears, for each statement that appends events, each
	// of their subscriptions' ids: live streams follow it.
	EventsChannel = "geogate_events"
	// DeliveriesChannel hears of each statement that appends an event
	// pending delivery, and of each dead letter replayed: delivery
	// workers follow it.
	DeliveriesChannel = "geogate_deliveries"
)

// ValidID says whether id is written as a UUID, as the ids of events and
// subscriptions are, so that a malformed id is a 404 rather than a
// database error.
func ValidID(id string) bool {
	if len(id) != 36 {
		return false
	}
	for i, c := range id {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case '0' <= c && c <= '9', 'a' <= c && c <= 'f', 'A' <= c && c <= 'F':
		default:
			return false
		}
	}
	return true
}
