package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// LayerID names a layer in URLs, as OGC API collection ids and as MVT
// source layers. The rule, in order:
//
//   - the base is the table's name for a relation in the first published
//     schema, and schema__table (two underscores) for one in any other;
//   - a relation's first geometry or geography column (in column order)
//     is the layer base; each further one is base__column;
//   - an id is letters, digits, '_' and '-' only: any other character
//     (a space, a dot, which QGIS takes for a separator, anything beyond
//     ASCII) becomes '_', and the id then ends in '-' and six hex digits
//     of a hash of schema, table and column, so that it stays unique and
//     the same from one start to the next;
//   - should two relations still meet on one id, each takes that suffix.
//
// Case is kept: "Bus Stops" in schema transit is transit__Bus_Stops-1a2b3c.
func LayerID(firstSchema, schema, table, column string, firstColumn bool) string {
	base := table
	if schema != firstSchema {
		base = schema + "__" + table
	}
	if !firstColumn {
		base += "__" + column
	}
	id, changed := urlSafe(base)
	if changed {
		id += "-" + idHash(schema, table, column)
	}
	return id
}

// urlSafe replaces what an id may not hold with '_' and says whether it did.
func urlSafe(s string) (string, bool) {
	var b strings.Builder
	changed := false
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
			changed = true
		}
	}
	if b.Len() == 0 {
		return "_", true
	}
	return b.String(), changed
}

func idHash(schema, table, column string) string {
	sum := sha256.Sum256([]byte(schema + "\x00" + table + "\x00" + column))
	return hex.EncodeToString(sum[:3])
}

// uniqueIDs gives every layer whose id another layer also holds the hash
// suffix, so that each id names one layer.
func uniqueIDs(ls []*Layer) {
	count := map[string]int{}
	for _, l := range ls {
		count[l.ID]++
	}
	for _, l := range ls {
		if count[l.ID] > 1 {
			l.ID += "-" + idHash(l.Schema, l.Table, l.Column)
		}
	}
}
