package agent

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// scaleStore fills a store with n Services of perService endpoints each,
// spread over three nodes in two zones with zone hints.
func scaleStore(n, perService int) *store {
	s := newStore("node-a", time.Now(), func() {})
	s.node.Zone = "zone-a"
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		service := svc(func(sv *corev1.Service) {
			sv.Name = name
			ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250+1)
			sv.Spec.ClusterIP, sv.Spec.ClusterIPs = ip, []string{ip}
		})
		eps := make([]ep, 0, perService)
		for j := range perService {
			zone := []string{"zone-a", "zone-b"}[j%2]
			eps = append(eps, ep{fmt.Sprintf("10.%d.%d.%d", 64+i/250, i%250, j+1), fmt.Sprintf("node-%c", 'a'+j%3), "rs", []string{zone}})
		}
		sl := v4(8080, eps...)
		sl.Name = name + "-abcde"
		key := types.NamespacedName{Namespace: "ns", Name: name}
		s.setService(key, service)
		s.setSlice(key, sl.Name, sl, time.Time{})
	}
	return s
}

func BenchmarkConvert100Endpoints(b *testing.B) {
	eps := make([]ep, 0, 100)
	for j := range 100 {
		eps = append(eps, ep{fmt.Sprintf("10.1.%d.%d", j/200, j%200+1), fmt.Sprintf("node-%d", j%7), "rs", []string{fmt.Sprint("zone-", j%3)}})
	}
	in := ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{v4(8080, eps[:50]...), v4(8080, eps[50:]...)}}
	b.ReportAllocs()
	for b.Loop() {
		if c := Convert(in, thisNode); c.Skip != "" {
			b.Fatal(c.Skip)
		}
	}
}

// BenchmarkRefreshAll5000x10 is the conversion part of a full sync (or of a
// zone change) at 5,000 Services of 10 endpoints.
func BenchmarkRefreshAll5000x10(b *testing.B) {
	s := scaleStore(5000, 10)
	b.ReportAllocs()
	for b.Loop() {
		if p := s.refresh(true); len(p.services) != 5000 {
			b.Fatalf("%d services", len(p.services))
		}
	}
}

// BenchmarkRefreshOneDirty5000x10 is the conversion part of an incremental
// sync after one Service's slice changed among 5,000.
func BenchmarkRefreshOneDirty5000x10(b *testing.B) {
	s := scaleStore(5000, 10)
	s.refresh(true)
	key := types.NamespacedName{Namespace: "ns", Name: "svc-02500"}
	sl := s.slices[key]["svc-02500-abcde"]
	b.ReportAllocs()
	for b.Loop() {
		s.setSlice(key, sl.Name, sl, time.Time{})
		if p := s.refresh(false); p.changed != 1 || len(p.services) != 5000 {
			b.Fatalf("changed %d, services %d", p.changed, len(p.services))
		}
	}
}

func TestRefreshConvertsOnlyDirtyServices(t *testing.T) {
	s := scaleStore(50, 3)
	if p := s.refresh(false); p.changed != 50 || len(p.services) != 50 {
		t.Fatalf("first refresh converted %d, returned %d services; want 50, 50", p.changed, len(p.services))
	}
	if p := s.refresh(false); p.changed != 0 || len(p.services) != 50 {
		t.Fatalf("idle refresh converted %d, returned %d; want 0, 50", p.changed, len(p.services))
	}
	key := types.NamespacedName{Namespace: "ns", Name: "svc-00007"}
	s.setService(key, nil)
	if p := s.refresh(false); p.changed != 1 || len(p.services) != 49 {
		t.Fatalf("after a delete converted %d, returned %d; want 1, 49", p.changed, len(p.services))
	}
	s.setNode(&corev1.Node{})
	if p := s.refresh(false); p.changed != 49 {
		t.Fatalf("a zone change converted %d, want every Service (49)", p.changed)
	}
}

func TestTriggerTimesSurviveAFailedSync(t *testing.T) {
	s := scaleStore(3, 1)
	s.refresh(true)
	key := types.NamespacedName{Namespace: "ns", Name: "svc-00001"}
	sl := s.slices[key]["svc-00001-abcde"]
	changed := time.Now().Add(time.Second)
	s.setSlice(key, sl.Name, sl, changed)
	p := s.refresh(false)
	if got := p.triggers[key]; len(got) != 1 || !got[0].Equal(changed) {
		t.Fatalf("triggers %v, want [%v]", p.triggers, changed)
	}
	s.restoreTriggers(p.triggers)
	retry := s.refresh(false)
	if retry.changed != 1 || len(retry.triggers[key]) != 1 {
		t.Fatalf("retry converted %d with triggers %v; want the failed Service again with its trigger time", retry.changed, retry.triggers)
	}
	if again := s.refresh(false); len(again.triggers) != 0 {
		t.Fatalf("trigger times observed twice: %v", again.triggers)
	}
}

func TestOldTriggerTimesAreNotMeasured(t *testing.T) {
	s := scaleStore(1, 1)
	key := types.NamespacedName{Namespace: "ns", Name: "svc-00000"}
	sl := s.slices[key]["svc-00000-abcde"]
	s.setSlice(key, sl.Name, sl, s.started.Add(-time.Hour))
	if p := s.refresh(false); len(p.triggers) != 0 {
		t.Fatalf("a change from before the agent started was measured: %v", p.triggers)
	}
}
