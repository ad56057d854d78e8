// Package spatial holds a caller's spatial scope: the part of the world an
// API key or a token may reach, as a longitude / latitude box or a
// (multi)polygon in WGS84, with the containment and intersection checks
// every capability makes against it in pure Go. A nil *Scope is the whole
// world.
package spatial
