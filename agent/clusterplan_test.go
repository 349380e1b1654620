package agent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// derived owns the Service by a ServiceImport and carries the allocation.
func derived(a allocation.Allocation) func(*corev1.Service) {
	return func(s *corev1.Service) {
		s.OwnerReferences = []metav1.OwnerReference{{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: mcsv1beta1.ServiceImportKindName, Name: "web"}}
		s.Annotations = map[string]string{allocation.Annotation: a.String()}
	}
}

func weightsByAddr(p dataplane.Port) map[string]uint16 {
	out := map[string]uint16{}
	for _, e := range p.Endpoints {
		out[e.Addr.String()] = max(e.Weight, 1)
	}
	return out
}

func TestConvertFollowsTheClusterAllocation(t *testing.T) {
	spill := allocation.Allocation{Mode: "Spill", Clusters: []allocation.Cluster{
		{Cluster: "a", Local: 0.75, Spill: []allocation.Share{{To: "b", Share: 0.25}}},
		{Cluster: "b", Local: 1},
	}}
	inA := selection.Node{Name: "node-a", Zone: "zone-a", Cluster: "a"}
	inB := selection.Node{Name: "node-b", Zone: "zone-a", Cluster: "b"}
	slices := []*discoveryv1.EndpointSlice{
		builders.MakeImportedSlice("ns", "web-a", "web", "a").DerivedService("web").Port("http", 8080).Endpoints(endpointsOf(ep{addr: "10.1.0.1", flags: "rs"})...).Obj(),
		builders.MakeImportedSlice("ns", "web-b", "web", "b").DerivedService("web").Port("http", 8080).Endpoints(endpointsOf(ep{addr: "10.2.0.1", flags: "rs"}, ep{addr: "10.2.0.2", flags: "rs"})...).Obj(),
	}
	tests := []struct {
		name   string
		svc    *corev1.Service
		slices []*discoveryv1.EndpointSlice
		node   selection.Node
		want   map[string]uint16
	}{
		{
			name: "a's clients keep 3/4 on a's endpoint and spill 1/4 over b's two",
			svc:  svc(derived(spill)), slices: slices, node: inA,
			want: map[string]uint16{"10.1.0.1:8080": 6, "10.2.0.1:8080": 1, "10.2.0.2:8080": 1},
		},
		{
			name: "b's clients keep everything",
			svc:  svc(derived(spill)), slices: slices, node: inB,
			want: map[string]uint16{"10.2.0.1:8080": 1, "10.2.0.2:8080": 1},
		},
		{
			name: "a's endpoint not ready: a's clients fail over to b at once",
			svc:  svc(derived(spill)), node: inA,
			slices: []*discoveryv1.EndpointSlice{
				builders.MakeImportedSlice("ns", "web-a", "web", "a").DerivedService("web").Port("http", 8080).Endpoints(endpointsOf(ep{addr: "10.1.0.1", flags: "s"})...).Obj(),
				builders.MakeImportedSlice("ns", "web-b", "web", "b").DerivedService("web").Port("http", 8080).Endpoints(endpointsOf(ep{addr: "10.2.0.1", flags: "rs"}, ep{addr: "10.2.0.2", flags: "rs"})...).Obj(),
			},
			want: map[string]uint16{"10.2.0.1:8080": 1, "10.2.0.2:8080": 1},
		},
		{
			name: "without a cluster id the allocation is ignored: spread over all",
			svc:  svc(derived(spill)), slices: slices, node: thisNode,
			want: map[string]uint16{"10.1.0.1:8080": 1, "10.2.0.1:8080": 1, "10.2.0.2:8080": 1},
		},
		{
			name: "a Service no ServiceImport owns is not steered by the annotation",
			svc: svc(func(s *corev1.Service) {
				s.Annotations = map[string]string{allocation.Annotation: spill.String()}
			}),
			slices: slices, node: inA,
			want: map[string]uint16{"10.1.0.1:8080": 1, "10.2.0.1:8080": 1, "10.2.0.2:8080": 1},
		},
		{
			name: "an allocation that does not validate is ignored",
			svc: svc(derived(spill), func(s *corev1.Service) {
				s.Annotations[allocation.Annotation] = `{"mode":"Spill","clusters":[{"cluster":"a","local":0.2}]}`
			}),
			slices: slices, node: inA,
			want: map[string]uint16{"10.1.0.1:8080": 1, "10.2.0.1:8080": 1, "10.2.0.2:8080": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := Convert(ServiceInputs{Service: tt.svc, Slices: tt.slices}, tt.node)
			if out.Skip != "" || len(out.Service.Ports) != 1 {
				t.Fatalf("converted %+v", out)
			}
			got := weightsByAddr(out.Service.Ports[0])
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
			// The dataplane takes what Convert produces.
			if _, _, err := dataplane.Render(t.Context(), []dataplane.Service{out.Service}, dataplane.Options{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
