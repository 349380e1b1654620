package agent

import (
	"fmt"
	"reflect"
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
		if p := s.refresh(true); len(p.all()) != 5000 {
			b.Fatalf("%d services", len(p.all()))
		}
	}
}

// BenchmarkEveryServiceAfterOneChange5000x10 is what incremental syncs cost the agent while the
// dataplane asks for every Service (after a failed sync, or while two Services claim one address
// and port): the first converts them all again, as the store keeps no copy, the next ones only
// what changed.
func BenchmarkEveryServiceAfterOneChange5000x10(b *testing.B) {
	s := scaleStore(5000, 10)
	s.refresh(true)
	key := types.NamespacedName{Namespace: "ns", Name: "svc-00500"}
	sl := s.slices[key]["svc-00500-abcde"]
	b.ReportAllocs()
	for b.Loop() {
		s.setSlice(key, sl.Name, sl, time.Time{})
		if p := s.refresh(false); len(p.all()) != 5000 {
			b.Fatalf("%d services", len(p.all()))
		}
	}
}

// BenchmarkRefreshOneDirty is the conversion part of an incremental sync
// after one Service's slice changed, and after one Service was added: both
// should cost the same whatever the number of Services.
func BenchmarkRefreshOneDirty(b *testing.B) {
	for _, n := range []int{1000, 10000, 50000} {
		s := scaleStore(n, 10)
		s.refresh(true)
		key := types.NamespacedName{Namespace: "ns", Name: "svc-00500"}
		sl := s.slices[key]["svc-00500-abcde"]
		b.Run(fmt.Sprintf("slice-changed/services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.setSlice(key, sl.Name, sl, time.Time{})
				if p := s.refresh(false); p.changed != 1 || len(p.updated) != 1 {
					b.Fatalf("changed %d, updated %d", p.changed, len(p.updated))
				}
			}
		})
		added := types.NamespacedName{Namespace: "ns", Name: "svc-added"}
		b.Run(fmt.Sprintf("service-added/services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.setService(added, s.services[key])
				s.setSlice(added, sl.Name, sl, time.Time{})
				if p := s.refresh(false); p.changed != 1 || len(p.updated) != 1 {
					b.Fatalf("changed %d, updated %d", p.changed, len(p.updated))
				}
				b.StopTimer()
				s.setService(added, nil)
				s.refresh(false)
				b.StartTimer()
			}
		})
	}
}

// TestRefreshKeepsCountsOfEveryService checks the counts a sync reads without
// a walk against a walk of the Service list, through adds, changes, deletes
// and Services that are skipped.
func TestRefreshKeepsCountsOfEveryService(t *testing.T) {
	s := scaleStore(30, 3)
	check := func(step string) {
		t.Helper()
		p := s.refresh(false)
		all := p.all()
		skipped := 0
		for _, c := range s.converted {
			if c.skipped {
				skipped++
			}
		}
		if p.counts.programmed != len(all) || p.counts.skipped != skipped || len(all)+skipped != len(s.services) {
			t.Fatalf("%s: counts %+v; listed %d programmed, %d skipped of %d Services", step, p.counts, len(all), skipped, len(s.services))
		}
		for i := 1; i < len(all); i++ {
			if all[i-1].Key() >= all[i].Key() {
				t.Fatalf("%s: list not ordered by key at %d: %s, %s", step, i, all[i-1].Key(), all[i].Key())
			}
		}
	}
	check("first refresh")
	for i := range 10 {
		key := types.NamespacedName{Namespace: "ns", Name: fmt.Sprintf("svc-%05d", i*3)}
		switch i % 3 {
		case 0:
			s.setService(key, nil)
		case 1:
			headless := s.services[key].DeepCopy()
			headless.Spec.ClusterIP, headless.Spec.ClusterIPs = corev1.ClusterIPNone, []string{corev1.ClusterIPNone}
			s.setService(key, headless)
		case 2:
			moved := s.services[key].DeepCopy()
			moved.Namespace = "ns2"
			s.setService(types.NamespacedName{Namespace: moved.Namespace, Name: moved.Name}, moved)
		}
		check(fmt.Sprintf("change %d", i))
	}
	s.setNode(&corev1.Node{})
	check("after a node change")
}

func TestRefreshConvertsOnlyDirtyServices(t *testing.T) {
	s := scaleStore(50, 3)
	if p := s.refresh(false); p.changed != 50 || len(p.all()) != 50 {
		t.Fatalf("first refresh converted %d, returned %d services; want 50, 50", p.changed, len(p.all()))
	}
	if p := s.refresh(false); p.changed != 0 || len(p.all()) != 50 {
		t.Fatalf("idle refresh converted %d, returned %d; want 0, 50", p.changed, len(p.all()))
	}
	key := types.NamespacedName{Namespace: "ns", Name: "svc-00007"}
	s.setService(key, nil)
	if p := s.refresh(false); p.changed != 1 || len(p.all()) != 49 {
		t.Fatalf("after a delete converted %d, returned %d; want 1, 49", p.changed, len(p.all()))
	}
	s.setNode(&corev1.Node{})
	if p := s.refresh(false); p.changed != 49 {
		t.Fatalf("a zone change converted %d, want every Service (49)", p.changed)
	}
}

// The store keeps no converted Service once the dataplanes have it: a sync that needs every
// Service after an incremental refresh gets them converted again, equal to what a refresh of
// every Service lists.
func TestEveryServiceAfterAnIncrementalRefreshIsConvertedAgain(t *testing.T) {
	s := scaleStore(40, 3)
	s.refresh(true)
	changed := types.NamespacedName{Namespace: "ns", Name: "svc-00003"}
	sl := s.slices[changed]["svc-00003-abcde"].DeepCopy()
	sl.Endpoints = sl.Endpoints[:1]
	s.setSlice(changed, sl.Name, sl, time.Time{})
	s.setService(types.NamespacedName{Namespace: "ns", Name: "svc-00009"}, nil)
	p := s.refresh(false)
	got := p.all()
	if want := s.refresh(true).all(); len(got) != 39 || !reflect.DeepEqual(got, want) {
		t.Fatalf("after an incremental refresh every Service lists %d, a full refresh %d (or they differ)", len(got), len(want))
	}
	for _, svc := range got {
		if svc.Name == changed.Name && len(svc.Ports[0].Endpoints) > 1 {
			t.Fatalf("%s listed with its old endpoints %v", svc.Name, svc.Ports[0].Endpoints)
		}
	}
	// Syncs that keep asking get the list patched; the first that does not drops it.
	s.setService(types.NamespacedName{Namespace: "ns", Name: "svc-00011"}, nil)
	if p := s.refresh(false); len(p.all()) != 38 || s.every == nil {
		t.Fatalf("a second sync asking for every Service lists %d (kept: %v)", len(p.all()), s.every != nil)
	}
	s.refresh(false)
	s.refresh(false)
	if s.every != nil {
		t.Fatalf("the store still keeps every Service after syncs that did without them")
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
