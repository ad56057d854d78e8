package importer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Format is an input format, detected from content.
type Format string

// The formats Import reads.
const (
	FormatFeatureCollection Format = "GeoJSON FeatureCollection"
	FormatNDJSON            Format = "newline-delimited GeoJSON"
	FormatArray             Format = "JSON array"
)

// geoFeature is a GeoJSON Feature with its parts left undecoded.
type geoFeature struct {
	Type       string          `json:"type"`
	ID         json.RawMessage `json:"id"`
	Geometry   json.RawMessage `json:"geometry"`
	Properties json.RawMessage `json:"properties"`
}

// item is one input element: a feature or a cities record, with its
// position. err is set when the element itself is malformed but the input
// can go on (a bad NDJSON line).
type item struct {
	index   int
	line    int
	feature *geoFeature
	record  []flatMember // a flat record such as a city, when feature is nil
	err     error
}

// position names an item for error messages.
func (it *item) position() Position { return Position{Index: it.index, Line: it.line} }

// source yields the items of one input.
type source interface {
	// next fills it and returns io.EOF after the last item; any other
	// error means the input cannot be read further.
	next(it *item) error
	format() Format
}

// newSource detects the input format from its first bytes: '[' is a JSON
// array (cities records or features), '{' is a FeatureCollection or, when
// the first object is a Feature, newline-delimited GeoJSON.
func newSource(r io.Reader) (source, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	line := 1
	for {
		b, err := br.ReadByte()
		if err == io.EOF {
			return nil, ErrEmptyInput
		}
		if err != nil {
			return nil, err
		}
		switch b {
		case '\n':
			line++
			continue
		case ' ', '\t', '\r':
			continue
		case 0xEF: // UTF-8 byte order mark
			if rest, _ := br.Peek(2); bytes.Equal(rest, []byte{0xBB, 0xBF}) {
				br.Discard(2)
				continue
			}
		}
		br.UnreadByte()
		switch b {
		case '[':
			return newArraySource(br)
		case '{':
			return newObjectSource(br, line)
		}
		return nil, fmt.Errorf("input is not GeoJSON or a JSON array: it starts with %q", b)
	}
}

// arraySource streams the elements of a top-level JSON array. Flat
// records (the cities) take a fast path that decodes nothing but their
// few values; anything else goes through encoding/json.
type arraySource struct {
	el      elements
	n       int
	members []flatMember
}

func newArraySource(br *bufio.Reader) (*arraySource, error) {
	br.ReadByte() // '[', peeked by newSource
	return &arraySource{el: elements{br: br}}, nil
}

func (s *arraySource) format() Format { return FormatArray }

func (s *arraySource) next(it *item) error {
	raw, err := s.el.next()
	if err == io.EOF {
		return io.EOF
	}
	if err != nil {
		return fmt.Errorf("after feature %d: %w", s.n-1, err)
	}
	*it = item{index: s.n}
	s.n++
	if m, ok := parseFlat(raw, s.members[:0]); ok && !isFeature(m) {
		s.members, it.record = m, m
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		it.err = fmt.Errorf("not a JSON object: %w", syntaxError(err))
		return nil
	}
	if t, _ := unquote(obj["type"]); t == "Feature" {
		it.feature = &geoFeature{Type: t, ID: obj["id"], Geometry: obj["geometry"], Properties: obj["properties"]}
		return nil
	}
	for k, v := range obj {
		it.record = append(it.record, flatMember{key: []byte(k), value: v})
	}
	return nil
}

func isFeature(m []flatMember) bool {
	for _, kv := range m {
		if string(kv.key) == "type" {
			t, _ := unquote(kv.value)
			return t == "Feature"
		}
	}
	return false
}

// collectionSource streams the features array of a FeatureCollection.
type collectionSource struct {
	dec *json.Decoder
	n   int
}

func (s *collectionSource) format() Format { return FormatFeatureCollection }

func (s *collectionSource) next(it *item) error {
	if s.dec == nil {
		return io.EOF
	}
	if !s.dec.More() {
		if _, err := s.dec.Token(); err != nil { // ']'
			return fmt.Errorf("after feature %d: %w", s.n-1, syntaxError(err))
		}
		if err := skipMembers(s.dec); err != nil { // members after "features"
			return err
		}
		s.dec = nil
		return io.EOF
	}
	*it = item{index: s.n, feature: new(geoFeature)}
	s.n++
	if err := s.dec.Decode(it.feature); err != nil {
		if !isTypeError(err) {
			return fmt.Errorf("feature %d: %w", it.index, syntaxError(err))
		}
		it.err = syntaxError(err)
	}
	return nil
}

// skipMembers reads the rest of an object up to and including its '}',
// then checks that nothing but whitespace follows.
func skipMembers(dec *json.Decoder) error {
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return syntaxError(err)
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return syntaxError(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return syntaxError(err)
	}
	return trailing(dec)
}

func trailing(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected content after the end of the JSON document")
	}
	return io.EOF
}

// newObjectSource reads the first top-level object's members up to
// "features" (a FeatureCollection, streamed from there) or to its end (a
// Feature: the input is newline-delimited GeoJSON).
func newObjectSource(br *bufio.Reader, line int) (source, error) {
	dec := json.NewDecoder(br)
	if _, err := dec.Token(); err != nil {
		return nil, syntaxError(err)
	}
	var first geoFeature
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxError(err)
		}
		key, _ := tok.(string)
		if key == "features" {
			tok, err := dec.Token()
			if err != nil {
				return nil, syntaxError(err)
			}
			if d, ok := tok.(json.Delim); !ok || d != '[' {
				return nil, errors.New(`FeatureCollection: "features" is not an array`)
			}
			return &collectionSource{dec: dec}, nil
		}
		var dst any = new(json.RawMessage)
		switch key {
		case "type":
			dst = &first.Type
		case "id":
			dst = &first.ID
		case "geometry":
			dst = &first.Geometry
		case "properties":
			dst = &first.Properties
		}
		if err := dec.Decode(dst); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, syntaxError(err))
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, syntaxError(err)
	}
	switch first.Type {
	case "FeatureCollection":
		return &collectionSource{}, nil // no features member: empty
	case "Feature":
	default:
		return nil, fmt.Errorf("line %d: a GeoJSON object of type %q; want a FeatureCollection or one Feature per line", line, first.Type)
	}
	sc := bufio.NewScanner(io.MultiReader(dec.Buffered(), br))
	sc.Buffer(make([]byte, 0, 1<<20), 512<<20)
	// The scanner starts in the middle of the first feature's line.
	if sc.Scan() && len(bytes.TrimSpace(sc.Bytes())) > 0 {
		return nil, fmt.Errorf("line %d: unexpected content after the first feature; newline-delimited GeoJSON holds one Feature per line", line)
	}
	return &lineSource{sc: sc, line: line, n: 1, first: &first}, nil
}

// lineSource reads newline-delimited GeoJSON, one Feature per line. A line
// that does not parse is an item error, so it can be skipped.
type lineSource struct {
	sc    *bufio.Scanner
	line  int
	n     int
	first *geoFeature
}

func (s *lineSource) format() Format { return FormatNDJSON }

func (s *lineSource) next(it *item) error {
	if s.first != nil {
		*it = item{index: 0, line: s.line, feature: s.first}
		s.first = nil
		return nil
	}
	for s.sc.Scan() {
		s.line++
		b := bytes.TrimSpace(s.sc.Bytes())
		if len(b) == 0 {
			continue
		}
		*it = item{index: s.n, line: s.line, feature: new(geoFeature)}
		s.n++
		if err := json.Unmarshal(b, it.feature); err != nil {
			it.err = fmt.Errorf("not a JSON object: %w", syntaxError(err))
		} else if it.feature.Type != "Feature" {
			it.err = fmt.Errorf("type is %q, want \"Feature\"", it.feature.Type)
		}
		return nil
	}
	if err := s.sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", s.line+1, err)
	}
	return io.EOF
}

// isTypeError reports whether err is a JSON value of the wrong type, after
// which the decoder can go on with the next element.
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// syntaxError makes encoding/json errors readable without Go type names.
func syntaxError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at byte %d: %s", se.Offset, se.Error())
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%q has the wrong JSON type (%s)", te.Field, te.Value)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of input")
	}
	return err
}
