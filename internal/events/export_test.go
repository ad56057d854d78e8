package events

// The statements whose plans the tests look at, and the settings a
// report runs them under.
const (
	LoadStaysSQL     = loadStaysSQL
	LockDevicesSQL   = lockDevicesSQL
	UpdateDevicesSQL = updateDevicesSQL
	EndStaysSQL      = endStaysSQL
	SmallJoinsSQL    = smallJoinsSQL
	PruneSQL         = pruneSQL
	TrackSQL         = trackSQL
)
