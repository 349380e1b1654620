package explain

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/selection"
)

// The helpers build a small cluster: Nodes in zones, Pods of app=web on them, the Service and
// slices laid out from the controller's own desired endpoints, so an untouched layout is exactly
// what the controller keeps.

func testNode(name, zone, cpu string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	return n
}

func testPod(i int, node string) *corev1.Pod {
	ip := fmt.Sprintf("10.0.0.%d", i)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

func testService(annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Annotations: annotations},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, ClusterIP: "10.96.0.10", IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// layout puts the desired endpoints into slices of per endpoints each, hinting each endpoint
// with hint(endpoint) (nil: none).
func layout(svc *corev1.Service, pods []*corev1.Pod, nodes []*corev1.Node, per int, hint func(discoveryv1.Endpoint) *discoveryv1.EndpointHints) []*discoveryv1.EndpointSlice {
	byName := map[string]*corev1.Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var out []*discoveryv1.EndpointSlice
	for _, set := range endpoints.Desired(svc, endpoints.PodsOf(pods), byName) {
		for start := 0; start < len(set.Endpoints); start += per {
			s := &discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: fmt.Sprintf("web-%02d", len(out)), Labels: map[string]string{
					discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: selection.ManagedBy,
				}},
				AddressType: set.AddressType, Ports: set.Ports,
			}
			for _, ep := range set.Endpoints[start:min(start+per, len(set.Endpoints))] {
				ep.Hints = hint(ep)
				s.Endpoints = append(s.Endpoints, ep)
			}
			out = append(out, s)
		}
	}
	return out
}

func ownZone(ep discoveryv1.Endpoint) *discoveryv1.EndpointHints {
	return &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: *ep.Zone}}}
}

func noHints(discoveryv1.Endpoint) *discoveryv1.EndpointHints { return nil }

// threeZones has one Node per zone with the given CPUs and perZone Pods on each.
func threeZones(cpus [3]string, perZone int) ([]*corev1.Node, []*corev1.Pod) {
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for z, cpu := range cpus {
		node := testNode(fmt.Sprintf("node-%c", 'a'+z), fmt.Sprintf("zone-%c", 'a'+z), cpu)
		nodes = append(nodes, node)
		for i := range perZone {
			pods = append(pods, testPod(1+z*perZone+i, node.Name))
		}
	}
	return nodes, pods
}

// annotated is the Service opted in by annotation instead of spec.selector.
func annotated(selector string) *corev1.Service {
	svc := testService(map[string]string{selection.Annotation: selector})
	svc.Spec.Selector = nil
	return svc
}

func TestExplainService(t *testing.T) {
	auto := map[string]string{hints.AnnotationTopologyMode: "Auto"}
	evenNodes, evenPods := threeZones([3]string{"4", "4", "4"}, 3)
	skewNodes, skewPods := threeZones([3]string{"8", "2", "2"}, 3)
	fewNodes, fewPods := threeZones([3]string{"4", "4", "4"}, 2)
	unzoned := append([]*corev1.Node{testNode("node-x", "", "4")}, evenNodes...)
	small := DefaultSettings()
	small.MaxEndpointsPerSlice = 2
	optedIn := DefaultSettings()
	optedIn.Services = selection.ScopeOptedIn

	cases := []struct {
		name     string
		svc      *corev1.Service
		nodes    []*corev1.Node
		pods     []*corev1.Pod
		slices   []*discoveryv1.EndpointSlice
		settings Settings
		// want are phrases the rendered explanation must contain; matches whether it ends in
		// MATCHES.
		want    []string
		matches bool
	}{{
		name: "even zones with own-zone hints match", svc: testService(auto), nodes: evenNodes, pods: evenPods,
		slices: layout(testService(auto), evenPods, evenNodes, 100, ownZone), settings: DefaultSettings(), matches: true,
		want: []string{"topology:   Auto, from annotation service.kubernetes.io/topology-mode=Auto", "hints IPv4: on: 9 ready endpoints",
			"zone-a  4000m", "33.3%", "9 endpoints need 1 slices of at most 100", "MATCHES"},
	}, {
		name: "hints missing in the slices differ", svc: testService(auto), nodes: evenNodes, pods: evenPods,
		slices: layout(testService(auto), evenPods, evenNodes, 100, noHints), settings: DefaultSettings(),
		want: []string{"9 endpoints carry other hints than decided", "10.0.0.1 (zone zone-a) is hinted for none, decided zone-a",
			"9 endpoints with other hints than decided"},
	}, {
		name: "too few endpoints per zone keep hints off", svc: testService(auto), nodes: fewNodes, pods: fewPods,
		slices: layout(testService(auto), fewPods, fewNodes, 100, noHints), settings: DefaultSettings(), matches: true,
		want: []string{"hints IPv4: off: InsufficientNumberOfEndpoints: 6 ready endpoints in 3 zones, below the 9 needed to enable hints"},
	}, {
		name: "skewed CPU moves hints to the big zone", svc: testService(auto), nodes: skewNodes, pods: skewPods,
		slices: layout(testService(auto), skewPods, skewNodes, 100, ownZone), settings: DefaultSettings(),
		// zone-a has 8 of 12 CPU: ceil(8/12 * 9 / 1.25) = 5 endpoints must serve it.
		want: []string{"zone-a  5        5        3", "2 endpoints carry other hints than decided", "decided zone-a"},
	}, {
		name: "a Node without a zone turns hints off", svc: testService(auto), nodes: unzoned, pods: evenPods,
		slices: layout(testService(auto), evenPods, unzoned, 100, noHints), settings: DefaultSettings(), matches: true,
		want: []string{"zones:      none usable: InsufficientNodeInfo", `node "node-x" has no topology.kubernetes.io/zone label`},
	}, {
		name: "fragmented slices over the bound are compacted", svc: testService(nil), nodes: evenNodes, pods: evenPods[:5],
		slices: layout(testService(nil), evenPods[:5], evenNodes, 1, noHints), settings: small,
		want: []string{"5 endpoints need 3 slices of at most 2 (ceil(5/2)); compaction merges above 4; fleetslice has 5",
			"slices over the bound to merge away", "hints IPv4: off: TopologyModeDisabled"},
	}, {
		name: "a new Pod is missing from the slices", svc: testService(nil), nodes: evenNodes, pods: evenPods,
		slices: layout(testService(nil), evenPods[:8], evenNodes, 100, noHints), settings: DefaultSettings(),
		want: []string{"1 desired endpoints missing from the slices", "the next sync makes 1 writes (0 creates, 1 updates, 0 deletes)"},
	}, {
		name: "opted-in scope leaves selector Services to kube-controller-manager", svc: testService(nil), nodes: evenNodes, pods: evenPods,
		settings: optedIn, matches: true,
		want: []string{"fleetslice writes none: the manager runs with --endpointslice-services=opted-in"},
	}, {
		name: "an annotation beside spec.selector is said to be ignored", nodes: evenNodes, pods: evenPods,
		svc:    testService(map[string]string{selection.Annotation: "app=other"}),
		slices: layout(testService(nil), evenPods, evenNodes, 100, noHints), settings: DefaultSettings(), matches: true,
		want: []string{"spec.selector app=web selects 9", "ignored:    the Service has spec.selector, so fleetslice.io/selector is ignored"},
	}, {
		name: "an opted-in Service selects by its annotation", nodes: evenNodes, pods: evenPods, svc: annotated("app=web"),
		slices: layout(annotated("app=web"), evenPods, evenNodes, 100, noHints), settings: optedIn, matches: true,
		want: []string{"annotation fleetslice.io/selector=app=web selects 9"},
	}, {
		name: "an annotation that does not parse keeps the slices", nodes: evenNodes, pods: evenPods, svc: annotated("app in (web)"),
		slices: layout(annotated("app=web"), evenPods, evenNodes, 100, noHints), settings: optedIn,
		want: []string{`fleetslice writes none: annotation fleetslice.io/selector="app in (web)" is not a selector of key=value pairs`,
			"so the controller keeps the slices as they are", "every sync stops until annotation fleetslice.io/selector is fixed; the 1 slices"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := ExplainService(ServiceInputs{Service: tc.svc, Pods: tc.pods, Nodes: tc.nodes, Slices: tc.slices, Settings: tc.settings})
			var out strings.Builder
			if err := rep.Render(&out); err != nil {
				t.Fatal(err)
			}
			t.Log("\n" + out.String())
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			if got := len(rep.Differences) == 0; got != tc.matches {
				t.Errorf("matches = %v, want %v; differences %q", got, tc.matches, rep.Differences)
			}
		})
	}
}

func TestSettingsFromArgs(t *testing.T) {
	s, problems := SettingsFromArgs([]string{"--leader-elect", "--topology-overload-threshold=0.5", "--max-endpoints-per-slice", "50",
		"--topology-min-endpoints-per-zone=x", "--endpointslice-services=opted-in"}, "test")
	if s.OverloadThreshold != 0.5 || s.MaxEndpointsPerSlice != 50 || s.Services != selection.ScopeOptedIn {
		t.Errorf("settings %+v", s)
	}
	if s.MinEndpointsPerZone != DefaultSettings().MinEndpointsPerZone || len(problems) != 1 {
		t.Errorf("a bad value must keep the default and be reported: %+v, %q", s, problems)
	}
}
