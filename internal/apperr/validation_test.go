package apperr

import "testing"

func TestValidationErrorCollects(t *testing.T) {
	var v ValidationError
	if v.Err() != nil {
		t.Fatalf("empty ValidationError.Err() = %v, want nil", v.Err())
	}
	v.Add("field required", "missing", "query", "lng")
	v.Add("must be at most 90", "less_than_equal", "query", "lat")
	err := v.Err()
	if err == nil {
		t.Fatal("Err() = nil after two failures")
	}
	want := "validation failed: query.lng: field required; query.lat: must be at most 90"
	if got := err.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
