package endpoints

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

var (
	v4 = discoveryv1.AddressTypeIPv4
	v6 = discoveryv1.AddressTypeIPv6
)

func TestDesiredAddressTypesAndFamilies(t *testing.T) {
	httpPorts := []discoveryv1.EndpointPort{port("http", 8080)}
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		want map[string][]string // Key -> addresses
	}{{
		name: "IPv4 Service takes IPv4 addresses only",
		svc:  service(),
		pods: []*corev1.Pod{pod("a", "10.0.0.1", "fd00::1"), pod("b", "fd00::2")},
		want: map[string][]string{KeyOf(v4, httpPorts): {"10.0.0.1"}},
	}, {
		name: "IPv6 Service takes IPv6 addresses only",
		svc:  service(families(corev1.IPv6Protocol)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1", "fd00::1"), pod("b", "10.0.0.2")},
		want: map[string][]string{KeyOf(v6, httpPorts): {"fd00::1"}},
	}, {
		name: "dual-stack Service has one set per family",
		svc:  service(families(corev1.IPv6Protocol, corev1.IPv4Protocol)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1", "fd00::1"), pod("b", "10.0.0.2")},
		want: map[string][]string{
			KeyOf(v4, httpPorts): {"10.0.0.1", "10.0.0.2"},
			KeyOf(v6, httpPorts): {"fd00::1"},
		},
	}, {
		name: "headless without families takes both families by Pod IP",
		svc:  service(headless, families()),
		pods: []*corev1.Pod{pod("a", "10.0.0.1"), pod("b", "fd00::2")},
		want: map[string][]string{
			KeyOf(v4, httpPorts): {"10.0.0.1"},
			KeyOf(v6, httpPorts): {"fd00::2"},
		},
	}, {
		name: "headful without families uses the ClusterIP's family",
		svc:  service(families(), func(s *corev1.Service) { s.Spec.ClusterIP = "fd00:96::10" }),
		pods: []*corev1.Pod{pod("a", "10.0.0.1", "fd00::1")},
		want: map[string][]string{KeyOf(v6, httpPorts): {"fd00::1"}},
	}, {
		name: "addresses are normalised and unparseable ones skipped",
		svc:  service(families(corev1.IPv4Protocol, corev1.IPv6Protocol)),
		pods: []*corev1.Pod{pod("a", "010.000.000.001", "FD00:0:0::0001"), pod("b", "not-an-ip")},
		want: map[string][]string{
			KeyOf(v4, httpPorts): {"10.0.0.1"},
			KeyOf(v6, httpPorts): {"fd00::1"},
		},
	}, {
		// The API server allows one IP per family; a Pod that lists more (an older or a
		// non-validating source) keeps them all, in its order, in one endpoint per family.
		name: "several IPs of one family stay one endpoint",
		svc:  service(families(corev1.IPv4Protocol, corev1.IPv6Protocol)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1", "fd00::1", "10.0.0.2", "fd00::2")},
		want: map[string][]string{
			KeyOf(v4, httpPorts): {"10.0.0.1+10.0.0.2"},
			KeyOf(v6, httpPorts): {"fd00::1+fd00::2"},
		},
	}, {
		name: "IPv6-only Pods have no endpoint in an IPv4 Service, and IPv4-only Pods none in an IPv6 one",
		svc:  service(families(corev1.IPv6Protocol)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1"), pod("b", "10.0.0.2", "fd00::2")},
		want: map[string][]string{KeyOf(v6, httpPorts): {"fd00::2"}},
	}, {
		name: "a dual-stack Service of IPv4-only Pods has an IPv4 set and no IPv6 one",
		svc:  service(families(corev1.IPv4Protocol, corev1.IPv6Protocol)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1"), pod("b", "10.0.0.2")},
		want: map[string][]string{KeyOf(v4, httpPorts): {"10.0.0.1", "10.0.0.2"}},
	}, {
		name: "endpoints sort numerically by address",
		svc:  service(),
		pods: []*corev1.Pod{pod("a", "10.0.0.10"), pod("b", "10.0.0.9"), pod("c", "9.0.0.1")},
		want: map[string][]string{KeyOf(v4, httpPorts): {"9.0.0.1", "10.0.0.9", "10.0.0.10"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := addressesOf(Desired(tc.svc, PodsOf(tc.pods), defaultNodes()))
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("addresses by set:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestAddressTypes(t *testing.T) {
	tests := []struct {
		name string
		svc  *corev1.Service
		want []discoveryv1.AddressType
	}{
		{"families in any order", service(families(corev1.IPv6Protocol, corev1.IPv4Protocol)), []discoveryv1.AddressType{v4, v6}},
		{"unknown family ignored", service(families("IPv5", corev1.IPv6Protocol)), []discoveryv1.AddressType{v6}},
		{"no families, IPv4 ClusterIP", service(families()), []discoveryv1.AddressType{v4}},
		{"no families, headless", service(families(), headless), []discoveryv1.AddressType{v4, v6}},
		{"no families, no ClusterIP", service(families(), func(s *corev1.Service) { s.Spec.ClusterIP = "" }), []discoveryv1.AddressType{v4, v6}},
		{"nil Service", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := AddressTypes(tc.svc); !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestDesiredPorts(t *testing.T) {
	named := corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}
	metrics := corev1.ServicePort{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9100),
		AppProtocol: ptr.To("kubernetes.io/h2c")}
	udpNamed := corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("http")}
	sidecar := func(p *corev1.Pod, policy corev1.ContainerRestartPolicy) *corev1.Pod {
		p.Spec.Containers[0].Ports = nil
		c := corev1.Container{Name: "proxy", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 15001, Protocol: corev1.ProtocolTCP}}}
		if policy != "" {
			c.RestartPolicy = ptr.To(policy)
		}
		p.Spec.InitContainers = []corev1.Container{c}
		return p
	}
	metricsPort := discoveryv1.EndpointPort{Name: ptr.To("metrics"), Port: ptr.To[int32](9100), Protocol: ptr.To(corev1.ProtocolTCP), AppProtocol: ptr.To("kubernetes.io/h2c")}
	tests := []struct {
		name string
		svc  *corev1.Service
		pods []*corev1.Pod
		want map[string][]string
	}{{
		name: "Pods of two templates land in two sets",
		svc:  service(servicePorts(named, metrics)),
		pods: []*corev1.Pod{pod("old", "10.0.0.1"), withContainerPort(pod("new", "10.0.0.2"), "http", 9090)},
		want: map[string][]string{
			KeyOf(v4, []discoveryv1.EndpointPort{port("http", 8080), metricsPort}): {"10.0.0.1"},
			KeyOf(v4, []discoveryv1.EndpointPort{metricsPort, port("http", 9090)}): {"10.0.0.2"},
		},
	}, {
		name: "a Pod without the named port goes to a set without that port",
		svc:  service(servicePorts(named, metrics)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1"), withContainerPort(pod("b", "10.0.0.2"), "other", 8080)},
		want: map[string][]string{
			KeyOf(v4, []discoveryv1.EndpointPort{port("http", 8080), metricsPort}): {"10.0.0.1"},
			KeyOf(v4, []discoveryv1.EndpointPort{metricsPort}):                     {"10.0.0.2"},
		},
	}, {
		name: "a named port must match the protocol too",
		svc:  service(servicePorts(udpNamed)),
		pods: []*corev1.Pod{pod("a", "10.0.0.1")},
		want: map[string][]string{KeyOf(v4, nil): {"10.0.0.1"}},
	}, {
		name: "sidecar containers resolve named ports, other init containers do not",
		svc:  service(servicePorts(named)),
		pods: []*corev1.Pod{
			sidecar(pod("a", "10.0.0.1"), corev1.ContainerRestartPolicyAlways), sidecar(pod("b", "10.0.0.2"), ""),
			sidecar(pod("c", "10.0.0.3"), corev1.ContainerRestartPolicyOnFailure),
		},
		want: map[string][]string{
			KeyOf(v4, []discoveryv1.EndpointPort{port("http", 15001)}): {"10.0.0.1"},
			KeyOf(v4, nil): {"10.0.0.2", "10.0.0.3"},
		},
	}, {
		name: "headless Service without ports",
		svc:  service(headless, servicePorts()),
		pods: []*corev1.Pod{pod("a", "10.0.0.1")},
		want: map[string][]string{KeyOf(v4, nil): {"10.0.0.1"}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := addressesOf(Desired(tc.svc, PodsOf(tc.pods), defaultNodes()))
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("addresses by set:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestDesiredSetFields(t *testing.T) {
	svc := service(servicePorts(
		corev1.ServicePort{Name: "web", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8443), AppProtocol: ptr.To("https")},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)},
	))
	sets := Desired(svc, PodsOf([]*corev1.Pod{pod("a", "10.0.0.1")}), defaultNodes())
	if len(sets) != 1 {
		t.Fatalf("got %d sets, want 1", len(sets))
	}
	want := []discoveryv1.EndpointPort{
		{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(corev1.ProtocolUDP)},
		{Name: ptr.To("web"), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP), AppProtocol: ptr.To("https")},
	}
	got := sets[0]
	if !equality.Semantic.DeepEqual(got.Ports, want) {
		t.Errorf("ports: got %v, want %v (sorted, with protocol and appProtocol)", got.Ports, want)
	}
	if got.AddressType != v4 || got.Key != KeyOf(v4, want) {
		t.Errorf("address type %q key %q, want IPv4 and %q", got.AddressType, got.Key, KeyOf(v4, want))
	}
	svc.Spec.Ports[0].AppProtocol = ptr.To("mutated")
	if *got.Ports[1].AppProtocol != "https" {
		t.Errorf("Set.Ports aliases the Service's appProtocol")
	}
}

func TestDesiredEndpointFields(t *testing.T) {
	hostnamed := func(p *corev1.Pod, hostname, subdomain string) *corev1.Pod {
		p.Spec.Hostname, p.Spec.Subdomain = hostname, subdomain
		return p
	}
	otherNamespace := pod("a", "10.0.0.1")
	otherNamespace.Namespace = "elsewhere"
	tests := []struct {
		name    string
		svc     *corev1.Service
		pod     *corev1.Pod
		want    *discoveryv1.Endpoint // nil: no endpoint at all
		unknown bool                  // reported as on an unknown Node
	}{{
		name: "ready Pod",
		svc:  service(),
		pod:  pod("a", "10.0.0.1"),
		want: endpoint("a", "10.0.0.1", true, true, false, "node-a", "zone-a", ""),
	}, {
		name: "not ready Pod",
		svc:  service(),
		pod:  notReady(pod("a", "10.0.0.1")),
		want: endpoint("a", "10.0.0.1", false, false, false, "node-a", "zone-a", ""),
	}, {
		name: "Pod without a Ready condition is not serving",
		svc:  service(),
		pod:  func() *corev1.Pod { p := pod("a", "10.0.0.1"); p.Status.Conditions = nil; return p }(),
		want: endpoint("a", "10.0.0.1", false, false, false, "node-a", "zone-a", ""),
	}, {
		name: "terminating ready Pod stays, serving but not ready",
		svc:  service(),
		pod:  terminating(pod("a", "10.0.0.1")),
		want: endpoint("a", "10.0.0.1", false, true, true, "node-a", "zone-a", ""),
	}, {
		name: "publishNotReadyAddresses makes a not ready Pod ready",
		svc:  service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		pod:  notReady(pod("a", "10.0.0.1")),
		want: endpoint("a", "10.0.0.1", true, false, false, "node-a", "zone-a", ""),
	}, {
		name: "publishNotReadyAddresses makes a terminating Pod ready",
		svc:  service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		pod:  terminating(notReady(pod("a", "10.0.0.1"))),
		want: endpoint("a", "10.0.0.1", true, false, true, "node-a", "zone-a", ""),
	}, {
		name: "succeeded Pod is dropped",
		svc:  service(),
		pod:  func() *corev1.Pod { p := pod("a", "10.0.0.1"); p.Status.Phase = corev1.PodSucceeded; return p }(),
	}, {
		name: "failed Pod is dropped",
		svc:  service(),
		pod:  func() *corev1.Pod { p := pod("a", "10.0.0.1"); p.Status.Phase = corev1.PodFailed; return p }(),
	}, {
		name: "Pod without IP is dropped",
		svc:  service(),
		pod:  pod("a"),
	}, {
		name: "Pod with podIP but no podIPs has no addresses, as upstream",
		svc:  service(),
		pod:  func() *corev1.Pod { p := pod("a", "10.0.0.1"); p.Status.PodIPs = nil; return p }(),
	}, {
		name:    "Pod with podIP only on an unknown Node is still reported, as upstream",
		svc:     service(),
		pod:     func() *corev1.Pod { p := onNode(pod("a", "10.0.0.1"), "node-x"); p.Status.PodIPs = nil; return p }(),
		unknown: true,
	}, {
		name: "pending Pod with an IP is an endpoint",
		svc:  service(),
		pod:  func() *corev1.Pod { p := notReady(pod("a", "10.0.0.1")); p.Status.Phase = corev1.PodPending; return p }(),
		want: endpoint("a", "10.0.0.1", false, false, false, "node-a", "zone-a", ""),
	}, {
		name: "hostname with matching subdomain",
		svc:  service(),
		pod:  hostnamed(pod("a", "10.0.0.1"), "db-0", "web"),
		want: endpoint("a", "10.0.0.1", true, true, false, "node-a", "zone-a", "db-0"),
	}, {
		name: "hostname with another subdomain is not published",
		svc:  service(),
		pod:  hostnamed(pod("a", "10.0.0.1"), "db-0", "db"),
		want: endpoint("a", "10.0.0.1", true, true, false, "node-a", "zone-a", ""),
	}, {
		name: "subdomain without hostname publishes nothing",
		svc:  service(),
		pod:  hostnamed(pod("a", "10.0.0.1"), "", "web"),
		want: endpoint("a", "10.0.0.1", true, true, false, "node-a", "zone-a", ""),
	}, {
		name: "hostname of a Pod in another namespace is not published",
		svc:  service(),
		pod:  hostnamed(otherNamespace, "db-0", "web"),
		want: func() *discoveryv1.Endpoint {
			ep := endpoint("a", "10.0.0.1", true, true, false, "node-a", "zone-a", "")
			ep.TargetRef.Namespace = "elsewhere"
			return ep
		}(),
	}, {
		name: "Node without zone label gives no zone",
		svc:  service(),
		pod:  onNode(pod("a", "10.0.0.1"), "node-c"),
		want: endpoint("a", "10.0.0.1", true, true, false, "node-c", "", ""),
	}, {
		name:    "Pod on an unknown Node is left out and reported",
		svc:     service(),
		pod:     onNode(pod("a", "10.0.0.1"), "node-x"),
		unknown: true,
	}, {
		name:    "Pod without a Node is left out and reported",
		svc:     service(),
		pod:     onNode(pod("a", "10.0.0.1"), ""),
		unknown: true,
	}, {
		name: "publishNotReadyAddresses keeps a Pod on an unknown Node, without zone",
		svc:  service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		pod:  onNode(pod("a", "10.0.0.1"), "node-x"),
		want: endpoint("a", "10.0.0.1", true, true, false, "node-x", "", ""),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Build(tc.svc, PodsOf([]*corev1.Pod{tc.pod}), defaultNodes())
			var got []discoveryv1.Endpoint
			for _, s := range res.Sets {
				got = append(got, s.Endpoints...)
			}
			switch {
			case tc.want == nil && len(got) != 0:
				t.Errorf("got endpoints %v, want none", got)
			case tc.want != nil && (len(got) != 1 || !equality.Semantic.DeepEqual(got[0], *tc.want)):
				t.Errorf("got %v\nwant %v", got, *tc.want)
			}
			wantUnknown := []string(nil)
			if tc.unknown {
				wantUnknown = []string{tc.pod.Namespace + "/" + tc.pod.Name}
			}
			if !slices.Equal(res.PodsOnUnknownNodes, wantUnknown) {
				t.Errorf("PodsOnUnknownNodes = %v, want %v", res.PodsOnUnknownNodes, wantUnknown)
			}
		})
	}
}

// endpoint is the endpoint of pod(name, ip) with the given content.
func endpoint(name, ip string, ready, serving, terminating bool, nodeName, zone, hostname string) *discoveryv1.Endpoint {
	ep := &discoveryv1.Endpoint{
		Addresses: []string{ip},
		Conditions: discoveryv1.EndpointConditions{
			Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating),
		},
		TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: testNamespace, Name: name, UID: pod(name).UID},
	}
	if nodeName != "" {
		ep.NodeName = ptr.To(nodeName)
	}
	if zone != "" {
		ep.Zone = ptr.To(zone)
	}
	if hostname != "" {
		ep.Hostname = ptr.To(hostname)
	}
	return ep
}

func TestDesiredIdentities(t *testing.T) {
	hostNetwork := func(name string) *corev1.Pod { return pod(name, "192.168.1.5") }
	a := pod("a", "10.0.0.1")
	pods := []*corev1.Pod{a, a.DeepCopy(), hostNetwork("ds-old"), terminating(hostNetwork("ds-new")), nil}
	sets := Desired(service(), PodsOf(pods), defaultNodes())
	if len(sets) != 1 {
		t.Fatalf("got %d sets, want 1", len(sets))
	}
	var names []string
	for _, ep := range sets[0].Endpoints {
		names = append(names, ep.TargetRef.Name)
	}
	// The duplicate Pod counts once; the two host-network Pods sharing an IP
	// are both listed, as upstream lists them.
	if want := []string{"a", "ds-new", "ds-old"}; !slices.Equal(names, want) {
		t.Errorf("endpoints for Pods %v, want %v", names, want)
	}
}

func TestDesiredDoesNotMutateOrAliasInputs(t *testing.T) {
	svc := service(families(corev1.IPv4Protocol, corev1.IPv6Protocol), servicePorts(corev1.ServicePort{
		Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http"), AppProtocol: ptr.To("http"),
	}))
	pods := []*corev1.Pod{pod("b", "10.0.0.2", "fd00::2"), pod("a", "10.0.0.1")}
	pods[0].Spec.Hostname, pods[0].Spec.Subdomain = "b", "web"
	nodes := defaultNodes()
	svcBefore, podsBefore := svc.DeepCopy(), []*corev1.Pod{pods[0].DeepCopy(), pods[1].DeepCopy()}
	nodesBefore := map[string]*corev1.Node{}
	for k, v := range nodes {
		nodesBefore[k] = v.DeepCopy()
	}

	sets := Desired(svc, PodsOf(pods), nodes)
	for i := range sets {
		for j := range sets[i].Endpoints {
			ep := &sets[i].Endpoints[j]
			*ep.NodeName, *ep.Zone, ep.TargetRef.Name = "x", "x", "x"
			if ep.Hostname != nil {
				*ep.Hostname = "x"
			}
		}
		for j := range sets[i].Ports {
			*sets[i].Ports[j].Name, *sets[i].Ports[j].AppProtocol = "x", "x"
		}
	}
	if !equality.Semantic.DeepEqual(svc, svcBefore) || !equality.Semantic.DeepEqual(pods, podsBefore) ||
		!equality.Semantic.DeepEqual(nodes, nodesBefore) {
		t.Errorf("inputs changed by Desired or through its output")
	}
}

func TestDesiredNilInputs(t *testing.T) {
	if got := Build(nil, PodsOf([]*corev1.Pod{pod("a", "10.0.0.1")}), nil); len(got.Sets) != 0 || len(got.PodsOnUnknownNodes) != 0 {
		t.Errorf("nil Service: got %+v, want nothing", got)
	}
	got := Build(service(), PodsOf([]*corev1.Pod{pod("a", "10.0.0.1"), pod("b", "10.0.0.2")}), nil)
	if len(got.Sets) != 0 || !slices.Equal(got.PodsOnUnknownNodes, []string{"shop/a", "shop/b"}) {
		t.Errorf("nil nodes: got %+v, want both Pods reported on unknown Nodes", got)
	}
}
