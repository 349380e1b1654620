package locality

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	wire "github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

func TestCPUFromNodesCountsReadyWorkers(t *testing.T) {
	got := CPUFromNodes([]*corev1.Node{
		builders.MakeNode("a1").Zone("a").CPU("4").Ready(true).Obj(),
		builders.MakeNode("a2").Zone("a").CPU("2").Ready(true).Obj(),
		builders.MakeNode("b1").Zone("b").CPU("8").Ready(true).Obj(),
		builders.MakeNode("down").Zone("b").CPU("16").Ready(false).Obj(),
		builders.MakeNode("cp").Zone("a").Label("node-role.kubernetes.io/control-plane", "").CPU("32").Ready(true).Obj(),
	})
	if got.MilliCPU != 14000 || got.Zones["a"] != 6000 || got.Zones["b"] != 8000 || len(got.Zones) != 2 {
		t.Fatalf("got %+v", got)
	}
	back, ok := NodeCPUFromAnnotations(got.Annotations())
	if !ok || back.MilliCPU != 14000 || back.Zones["a"] != 6000 || back.Zones["b"] != 8000 {
		t.Fatalf("round trip: %+v %v", back, ok)
	}

	unzoned := CPUFromNodes([]*corev1.Node{builders.MakeNode("a1").Zone("a").CPU("4").Ready(true).Obj(),
		builders.MakeNode("x").CPU("2").Ready(true).Obj()})
	if unzoned.MilliCPU != 6000 || unzoned.Zones != nil {
		t.Fatalf("a Node without zone must drop the zone split but keep the total: %+v", unzoned)
	}
	if _, has := unzoned.Annotations()[wire.AnnotationZoneMilliCPU]; has {
		t.Fatal("no zone annotation without a full zone split")
	}
	if _, ok := NodeCPUFromAnnotations(nil); ok {
		t.Fatal("a Lease without the annotation publishes no CPU")
	}
	// A zone split that disagrees with the total is ignored rather than trusted.
	bad, ok := NodeCPUFromAnnotations(map[string]string{wire.AnnotationWorkerMilliCPU: "10", wire.AnnotationZoneMilliCPU: "a=3"})
	if !ok || bad.MilliCPU != 10 || bad.Zones != nil {
		t.Fatalf("got %+v", bad)
	}
}

func slice(endpoints ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{Endpoints: endpoints}
}

func ep(addr, zone string, ready *bool) discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	if zone != "" {
		e.Zone = ptr.To(zone)
	}
	return e
}

func TestCountReady(t *testing.T) {
	got := CountReady([]*discoveryv1.EndpointSlice{
		slice(ep("10.0.0.1", "a", nil), ep("10.0.0.2", "a", ptr.To(true)), ep("10.0.0.3", "b", ptr.To(false))),
		slice(ep("10.0.0.1", "a", nil), ep("10.0.0.4", "", nil)),
		nil,
	})
	if got.Total != 3 || got.ByZone["a"] != 2 || got.ByZone["b"] != 0 || got.Unzoned != 1 {
		t.Fatalf("got %+v", got)
	}
}

func member(name string, cpu int64, ready int) Member {
	return Member{Name: name, CPU: NodeCPU{MilliCPU: cpu}, HasCPU: true, Ready: ReadyEndpoints{Total: ready}}
}

func TestDecidePublishesAndIsStable(t *testing.T) {
	members := []Member{member("small", 8000, 2), member("big", 8000, 8)}
	first := Decide(members, "", false, DefaultOptions())
	if first.Annotation == "" || first.Result.Mode != Spill {
		t.Fatalf("want a published spill, got %+v", first)
	}
	a, err := wire.Parse(first.Annotation)
	if err != nil {
		t.Fatal(err)
	}
	small, _ := a.For("small")
	if !near(small.Local, 0.5) || len(small.Spill) != 1 || small.Spill[0].To != "big" {
		t.Fatalf("small: %+v", small)
	}
	if big, _ := a.For("big"); big.Local != 1 || len(big.Spill) != 0 {
		t.Fatalf("big: %+v", big)
	}
	// Fed back, nothing changes: the controller writes nothing.
	again := Decide(members, first.Annotation, false, DefaultOptions())
	if again.Annotation != first.Annotation || again.Result.Changed {
		t.Fatalf("not stable:\n%s\n%s", first.Annotation, again.Annotation)
	}
}

func TestDecideHysteresisKeepsSpillWithinTheReturnBand(t *testing.T) {
	opts := DefaultOptions()
	members := []Member{member("small", 8000, 2), member("big", 8000, 8)}
	// small had no ready endpoint: everything went to big.
	failed := Decide([]Member{member("small", 8000, 0), member("big", 8000, 8)}, "", false, opts)
	if s, _ := mustParse(t, failed.Annotation).For("small"); s.Local != 0 {
		t.Fatalf("failover: %s", failed.Annotation)
	}
	// Two endpoints back: taking all of its traffic back would load them far above the return
	// band, so small returns to the fresh minimum spill (keeps 0.5) at once.
	back := Decide(members, failed.Annotation, false, opts)
	if s, _ := mustParse(t, back.Annotation).For("small"); !near(s.Local, 0.5) {
		t.Fatalf("return: %+v", s)
	}
	// A previous split within the band (spill 0.52: more than the 0.5 the bound needs, less than
	// the 0.55 the return threshold needs) is kept: no write for a small change.
	prev := wire.Allocation{Mode: "Spill", Clusters: []wire.Cluster{
		{Cluster: "big", Local: 1},
		{Cluster: "small", Local: 0.48, Spill: []wire.Share{{To: "big", Share: 0.52}}},
	}}.String()
	kept := Decide(members, prev, false, opts)
	if kept.Annotation != prev || kept.Result.Changed {
		t.Fatalf("want the previous allocation kept:\n%s\n%s", prev, kept.Annotation)
	}
}

func mustParse(t *testing.T, s string) wire.Allocation {
	t.Helper()
	a, err := wire.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecidePublishesNothingWithoutAnAllocation(t *testing.T) {
	if p := Decide([]Member{member("a", 4000, 0), member("b", 4000, 0)}, "", false, DefaultOptions()); p.Annotation != "" {
		t.Fatalf("no ready endpoints: want nothing, got %s", p.Annotation)
	}
	noCPU := []Member{{Name: "a", Ready: ReadyEndpoints{Total: 3}}, {Name: "b", Ready: ReadyEndpoints{Total: 1}}}
	if p := Decide(noCPU, "", false, DefaultOptions()); p.Annotation != "" || p.Result.Mode != Spread {
		t.Fatalf("no CPU: want nothing (agents spread anyway), got %+v", p)
	}
	// A garbled previous annotation is ignored, not fatal.
	if p := Decide([]Member{member("a", 4000, 3), member("b", 4000, 3)}, "{not json", false, DefaultOptions()); p.Annotation == "" {
		t.Fatal("a garbled previous value must not stop the allocation")
	}
}

func TestDecideWithZones(t *testing.T) {
	zoned := func(name string, cpu map[string]int64, ready map[string]int) Member {
		var total int64
		n := 0
		for _, v := range cpu {
			total += v
		}
		for _, v := range ready {
			n += v
		}
		return Member{Name: name, CPU: NodeCPU{MilliCPU: total, Zones: cpu}, HasCPU: true, Ready: ReadyEndpoints{Total: n, ByZone: ready}}
	}
	members := []Member{
		zoned("a", map[string]int64{"z1": 4000, "z2": 4000}, map[string]int{"z1": 3, "z2": 3}),
		zoned("b", map[string]int64{"z1": 4000, "z2": 4000}, map[string]int{"z1": 1, "z2": 5}),
	}
	p := Decide(members, "", true, DefaultOptions())
	a := mustParse(t, p.Annotation)
	b, _ := a.For("b")
	if len(b.Zones) != 2 {
		t.Fatalf("want zones for b: %s", p.Annotation)
	}
	z1 := b.Zones[0]
	if z1.Zone != "z1" || z1.InZone >= 1 || len(z1.OtherZones) == 0 || z1.OtherZones[0].To != "z2" {
		t.Fatalf("b's z1 has one endpoint for a quarter of the demand: it must send part to z2: %+v", z1)
	}
	// Without the zone preference, no zone rows.
	if flat := Decide(members, "", false, DefaultOptions()); strings.Contains(flat.Annotation, "zones") {
		t.Fatalf("no zones asked: %s", flat.Annotation)
	}
	// Intake only where spill arrives: here nobody spills.
	if strings.Contains(p.Annotation, "intake") {
		t.Fatalf("intake without spill: %s", p.Annotation)
	}
}

// DecideTiers publishes the tiered allocation, stable when fed back, and the KEP's default
// when asked: region A's one endpoint (a1) takes all of region A's traffic under first-ready,
// while the bounded selection keeps it within +25% and sends the rest beyond the region.
func TestDecideTiers(t *testing.T) {
	members := []Member{member("a1", 8000, 1), member("a2", 8000, 0), member("b1", 8000, 10)}
	tiers := map[string][][]string{"a1": {{"a1"}, {"a1", "a2"}}, "a2": {{"a2"}, {"a1", "a2"}}, "b1": {{"b1"}}}
	bounded := DecideTiers(members, tiers, "", false, SelectionBounded, DefaultOptions())
	if bounded.Annotation == "" || bounded.Result.MaxLoad > 1.25+1e-9 {
		t.Fatalf("bounded: %+v", bounded)
	}
	if again := DecideTiers(members, tiers, bounded.Annotation, false, SelectionBounded, DefaultOptions()); again.Annotation != bounded.Annotation {
		t.Fatalf("fed back:\n%s\n%s", bounded.Annotation, again.Annotation)
	}
	kep := DecideTiers(members, tiers, "", false, SelectionFirstReady, DefaultOptions())
	a2, _ := kep.Result.For("a2")
	if len(a2.Spill) != 1 || a2.Spill[0] != (Share{To: "a1", Share: 1}) || kep.Result.MaxLoad < 7 {
		t.Fatalf("first-ready: a2 %+v, max load %v", a2, kep.Result.MaxLoad)
	}
	if err := Selection("nearest").Validate(); err == nil || SelectionBounded.Validate() != nil || SelectionFirstReady.Validate() != nil {
		t.Fatal("Selection.Validate")
	}
}
