package sliceplan

import (
	"fmt"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// FuzzPlan: applying the planned changes to the existing slices gives exactly the desired
// content, and planning again from the result changes nothing.
func FuzzPlan(f *testing.F) {
	f.Add(uint16(0b1011), uint16(0b0110), uint16(0b0010), uint8(3))
	f.Add(uint16(0), uint16(0xffff), uint16(0), uint8(0))
	f.Add(uint16(0xffff), uint16(0), uint16(0xff), uint8(7))
	f.Fuzz(func(t *testing.T, wantMask, haveMask, differMask uint16, retype uint8) {
		var desired []*discoveryv1.EndpointSlice
		var existing []discoveryv1.EndpointSlice
		for i := range 16 {
			name := fmt.Sprintf("s%d", i)
			if wantMask&(1<<i) != 0 {
				s := localSlice("ns", "web", name, fmt.Sprintf("10.0.0.%d", i))
				s.ResourceVersion = ""
				if differMask&(1<<i) != 0 {
					s.Endpoints[0].Addresses = []string{fmt.Sprintf("10.9.0.%d", i)}
				}
				if retype != 0 && i%int(retype%8+1) == 0 {
					s.AddressType = discoveryv1.AddressTypeIPv6
				}
				desired = append(desired, &s)
			}
			if haveMask&(1<<i) != 0 {
				existing = append(existing, localSlice("ns", "web", name, fmt.Sprintf("10.0.0.%d", i)))
			}
		}
		changes := Plan(desired, existing)

		result := map[string]discoveryv1.EndpointSlice{}
		for _, s := range existing {
			result[s.Name] = s
		}
		for _, s := range changes.Delete {
			if _, ok := result[s.Name]; !ok {
				t.Fatalf("deletes %s, which does not exist", s.Name)
			}
			delete(result, s.Name)
		}
		for _, s := range changes.Update {
			if _, ok := result[s.Name]; !ok {
				t.Fatalf("updates %s, which does not exist", s.Name)
			}
			result[s.Name] = *s
		}
		for _, s := range changes.Create {
			if _, ok := result[s.Name]; ok {
				t.Fatalf("creates %s, which still exists", s.Name)
			}
			result[s.Name] = *s
		}
		if len(result) != len(desired) {
			t.Fatalf("%d slices after applying, want %d", len(result), len(desired))
		}
		var after []discoveryv1.EndpointSlice
		for _, want := range desired {
			got, ok := result[want.Name]
			if !ok || !SameContent(&got, want) {
				t.Fatalf("slice %s does not have the desired content", want.Name)
			}
			after = append(after, got)
		}
		if again := Plan(desired, after); !again.Empty() {
			t.Fatalf("planning again after applying changes %+v", again)
		}
	})
}

// BenchmarkImportedAndPlan measures one import reconcile's slice work: 3 clusters with 10
// source slices of 100 endpoints each, nothing changed since the last sync.
func BenchmarkImportedAndPlan(b *testing.B) {
	var brokerView []discoveryv1.EndpointSlice
	for _, cluster := range []string{"east", "west", "north"} {
		for s := range 10 {
			ips := make([]string, 100)
			for i := range ips {
				ips[i] = fmt.Sprintf("10.%d.%d.%d", len(cluster), s, i)
			}
			src := localSlice("shop", "web", fmt.Sprintf("web-%d", s), ips...)
			brokerView = append(brokerView, *BrokerCopies(cluster, "broker", "shop", "web", []*discoveryv1.EndpointSlice{&src})[0])
		}
	}
	clusters := []string{"east", "north", "west"}
	target := Target{Namespace: "shop", Service: "web", DerivedService: "derived-abc"}
	var existing []discoveryv1.EndpointSlice
	for _, s := range Imported(target, SourcesFromBroker(brokerView, clusters)) {
		existing = append(existing, *s)
	}
	b.ReportAllocs()
	for b.Loop() {
		desired := Imported(target, SourcesFromBroker(brokerView, clusters))
		if !Plan(desired, existing).Empty() {
			b.Fatal("nothing changed, yet the plan writes")
		}
	}
}
