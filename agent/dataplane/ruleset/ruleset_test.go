package ruleset

import (
	"testing"
	"unsafe"
)

// Values are the bulk of a full sync's transaction (three in an endpoint element's key, two in
// its data): a field added or reordered carelessly grows every one of them.
func TestValuePacksIntoThirtyTwoBytes(t *testing.T) {
	if got := unsafe.Sizeof(Value{}); got != 32 {
		t.Fatalf("ruleset.Value takes %d bytes, want 32", got)
	}
}
