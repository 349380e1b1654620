package e2ebench

import (
	"reflect"
	"testing"

	"github.com/fleetslice/fleetslice/internal/localset"
)

func TestCountEndpointSliceWrites(t *testing.T) {
	exposition := []byte(`# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="resource",subresource="",verb="PUT",version="v1"} 436
apiserver_request_total{code="409",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="resource",subresource="",verb="PUT",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="resource",subresource="",verb="DELETE",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="namespace",subresource="",verb="DELETECOLLECTION",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="discovery.k8s.io",resource="endpointslices",scope="namespace",subresource="",verb="LIST",version="v1"} 90
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="PUT",version="v1"} 7000
apiserver_request_duration_seconds_count{resource="endpointslices",verb="PUT"} 438
`)
	got, err := countEndpointSliceWrites(exposition)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"create": 3, "update": 438, "delete": 2, "conflict": 2}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if _, err := countEndpointSliceWrites([]byte(`apiserver_request_total{resource="endpointslices",verb="PUT" 5`)); err == nil {
		t.Fatal("a malformed line was accepted")
	}
}

func TestNewSidesRefusesAMemberNotInTheSet(t *testing.T) {
	cs := &localset.ClusterSet{Members: []string{"cluster-1", "cluster-2"}}
	if _, err := NewSides(cs, "cluster-3", "http://127.0.0.1:1/metrics"); err == nil {
		t.Fatal("NewSides accepted fleetslice in a cluster outside the set")
	}
}
