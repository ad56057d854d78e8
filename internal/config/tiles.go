package config

// Tiles holds the settings of internal/tiles.
type Tiles struct{}

func loadTiles(r *reader) Tiles {
	return Tiles{}
}
