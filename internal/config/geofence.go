package config

// Geofence holds the settings of internal/geofence.
type Geofence struct{}

func loadGeofence(r *reader) Geofence {
	return Geofence{}
}
