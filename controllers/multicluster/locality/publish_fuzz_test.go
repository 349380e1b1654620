package locality

import (
	"fmt"
	"testing"

	wire "github.com/fleetslice/fleetslice/api/allocation"
)

// FuzzDecide holds the published form to what the controller relies on to write nothing when
// nothing changed: whatever Decide publishes validates, parses back, and, fed back as the
// previous annotation with the same members, is published again byte for byte.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{3, 8, 2, 0, 8, 8, 4, 1}, true)
	f.Add([]byte{1, 0, 0, 4, 5, 9, 2, 2, 2}, false)
	f.Fuzz(func(t *testing.T, data []byte, zones bool) {
		var members []Member
		for i := 0; i+3 < len(data) && len(members) < 5; i += 4 {
			m := Member{Name: fmt.Sprintf("c%d", len(members)), HasCPU: data[i]%4 != 0}
			z1, z2 := int64(data[i+1]%8)*1000, int64(data[i+2]%8)*1000
			m.CPU = NodeCPU{MilliCPU: z1 + z2, Zones: map[string]int64{"z1": z1, "z2": z2}}
			e1, e2 := int(data[i+3]%5), int(data[i+3]/5%5)
			m.Ready = ReadyEndpoints{Total: e1 + e2, ByZone: map[string]int{"z1": e1, "z2": e2}}
			members = append(members, m)
		}
		first := Decide(members, "", zones, DefaultOptions())
		if first.Annotation == "" {
			return
		}
		a, err := wire.Parse(first.Annotation)
		if err != nil {
			t.Fatalf("published %s, which does not validate: %v", first.Annotation, err)
		}
		if a.String() != first.Annotation {
			t.Fatalf("not canonical:\n%s\n%s", first.Annotation, a.String())
		}
		again := Decide(members, first.Annotation, zones, DefaultOptions())
		if again.Annotation != first.Annotation {
			t.Fatalf("fed back, it changed (a write for nothing):\n%s\n%s", first.Annotation, again.Annotation)
		}
	})
}
