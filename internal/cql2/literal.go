package cql2

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Both encodings build their literals here, so that they accept and
// refuse the same values.

func newNumber(raw string, at loc) (*numberLit, error) {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, errAt(at, "the number %s is out of range", raw)
	}
	n := &numberLit{raw: raw, f: f, at: at}
	if !strings.ContainsAny(raw, ".eE") {
		if i, err := strconv.ParseInt(raw, 10, 64); err == nil {
			n.i, n.isInt = i, true
		}
	}
	return n, nil
}

// newString refuses the NUL character, which PostgreSQL text cannot hold:
// the statement would fail rather than find nothing.
func newString(v string, at loc) (*stringLit, error) {
	if strings.ContainsRune(v, 0) {
		return nil, errAt(at, "a character literal cannot hold the NUL character")
	}
	return &stringLit{v: v, at: at}, nil
}

var (
	dateRE      = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)
	timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$`)
)

// newTime reads the string of DATE('...') or TIMESTAMP('...'): a full
// date, or a date and a UTC time ending in Z, as the CQL2 grammar has it.
func newTime(raw string, date bool, at loc) (*timeLit, error) {
	if date {
		t, err := time.Parse(time.DateOnly, raw)
		if !dateRE.MatchString(raw) || err != nil {
			return nil, errAt(at, "%s is not a date such as '2024-03-01'", quoteString(raw))
		}
		return &timeLit{date: true, t: t, raw: raw, at: at}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, raw)
	if !timestampRE.MatchString(raw) || err != nil {
		return nil, errAt(at, "%s is not a UTC timestamp such as '2024-03-01T06:00:00Z'", quoteString(raw))
	}
	return &timeLit{t: t, raw: raw, at: at}, nil
}

// spatialFunctions are the CQL2 S_ functions, by the name of the PostGIS
// function that evaluates each on geometries.
var spatialFunctions = map[string]string{
	"S_INTERSECTS": "ST_Intersects",
	"S_EQUALS":     "ST_Equals",
	"S_DISJOINT":   "ST_Disjoint",
	"S_TOUCHES":    "ST_Touches",
	"S_WITHIN":     "ST_Within",
	"S_OVERLAPS":   "ST_Overlaps",
	"S_CROSSES":    "ST_Crosses",
	"S_CONTAINS":   "ST_Contains",
}

// checkPattern refuses a LIKE pattern that ends in its escape character,
// the backslash: PostgreSQL fails such a statement.
func checkPattern(p *stringLit) error {
	escaped := false
	for _, r := range p.v {
		escaped = !escaped && r == '\\'
	}
	if escaped {
		return errAt(p.at, `the LIKE pattern %s ends in its escape character \`, quoteString(p.v))
	}
	return nil
}

// unsupported names what a filter may say in CQL2 that this package does
// not implement, so that the client learns it is not a typo.
func unsupported(name string) (string, bool) {
	u := strings.ToUpper(name)
	switch {
	case u == "CASEI" || u == "ACCENTI":
		return u + " (case- and accent-insensitive comparison) is not supported", true
	case u == "INTERVAL" || strings.HasPrefix(u, "T_"):
		return u + ": temporal functions are not supported; compare timestamps with <, >, BETWEEN", true
	case strings.HasPrefix(u, "A_"):
		return u + ": array functions are not supported", true
	}
	return "", false
}
