package apimetrics

import (
	"reflect"
	"testing"
)

const exposition = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
apiserver_request_total{code="201",component="apiserver",dry_run="",group="multicluster.x-k8s.io",resource="serviceimports",scope="resource",subresource="",verb="POST",version="v1beta1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="multicluster.x-k8s.io",resource="serviceimports",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 4
apiserver_request_total{code="409",component="apiserver",dry_run="",group="multicluster.x-k8s.io",resource="serviceimports",scope="resource",subresource="status",verb="PUT",version="v1beta1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="namespace",subresource="",verb="DELETECOLLECTION",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="namespace",subresource="",verb="LIST",version="v1"} 90
apiserver_request_total{code="200",component="apiserver",dry_run="",group="coordination.k8s.io",resource="leases",scope="resource",subresource="",verb="PATCH",version="v1"} 7
apiserver_request_duration_seconds_count{resource="endpointslices",verb="PUT"} 438
apiserver_watch_events_total{group="discovery.k8s.io",resource="endpointslices",version="v1"} 10
apiserver_watch_events_total{group="coordination.k8s.io",resource="leases",version="v1"} 5
apiserver_watch_events_sizes_sum{group="discovery.k8s.io",resource="endpointslices",version="v1"} 20480
apiserver_watch_events_sizes_count{group="discovery.k8s.io",resource="endpointslices",version="v1"} 10
apiserver_watch_events_sizes_sum{group="coordination.k8s.io",resource="leases",version="v1"} 2500
`

func TestCountWrites(t *testing.T) {
	got, err := CountWrites([]byte(exposition), func(r string) bool { return r != "leases" })
	if err != nil {
		t.Fatal(err)
	}
	want := Writes{
		Served: map[Write]int{
			{"serviceimports", "create"}: 3, {"serviceimports/status", "update"}: 5, {"endpointslices", "delete"}: 1,
		},
		Conflicts: map[Write]int{{"serviceimports/status", "update"}: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got.Total() != 9 {
		t.Fatalf("total %d, want 9", got.Total())
	}
	all, err := CountWrites([]byte(exposition), nil)
	if err != nil {
		t.Fatal(err)
	}
	if since := all.Sub(got); !reflect.DeepEqual(since.Served, map[Write]int{{"leases", "patch"}: 7}) || len(since.Conflicts) != 0 {
		t.Fatalf("difference %+v, want only the lease patches", since)
	}
	if _, err := CountWrites([]byte(`apiserver_request_total{resource="endpointslices",verb="PUT" 5`), nil); err == nil {
		t.Fatal("a malformed line was accepted")
	}
}

func TestWatchEvents(t *testing.T) {
	events, bytes, err := WatchEvents([]byte(exposition), func(r string) bool { return r == "endpointslices" })
	if err != nil || events != 10 || bytes != 20480 {
		t.Fatalf("got %d events, %d bytes, %v; want 10 and 20480", events, bytes, err)
	}
	events, bytes, err = WatchEvents([]byte(exposition), nil)
	if err != nil || events != 15 || bytes != 22980 {
		t.Fatalf("got %d events, %d bytes, %v; want 15 and 22980", events, bytes, err)
	}
}

func TestWithoutDropsOneResourceServedAndConflicting(t *testing.T) {
	lease, slice := Write{Resource: "leases", Verb: "update"}, Write{Resource: "endpointslices", Verb: "create"}
	w := Writes{Served: map[Write]int{lease: 7, slice: 3}, Conflicts: map[Write]int{lease: 1, slice: 2}}
	got := w.Without("leases")
	if want := (Writes{Served: map[Write]int{slice: 3}, Conflicts: map[Write]int{slice: 2}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("Without(leases) = %+v, want %+v", got, want)
	}
	if w.Served[lease] != 7 {
		t.Fatal("Without changed the writes it read")
	}
}
