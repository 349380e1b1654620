package agent

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

var thisNode = selection.Node{Name: "node-a", Zone: "zone-a"}

// svc builds a ClusterIP Service with one TCP port "http" 80.
func svc(mods ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.0.0.10",
			ClusterIPs: []string{"10.0.0.10"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
		},
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// ep describes an endpoint: flags is a subset of "r" (ready), "s" (serving),
// "t" (terminating), or "-" for all conditions unset; hints are zone names.
type ep struct {
	addr, node, flags string
	zoneHints         []string
}

func slice(name string, addrType discoveryv1.AddressType, port int32, eps ...ep) *discoveryv1.EndpointSlice {
	return builders.MakeEndpointSlice("ns", name).Service("web").AddressType(addrType).Port("http", port).
		Endpoints(endpointsOf(eps...)...).Obj()
}

// endpointsOf turns ep descriptions into endpoints.
func endpointsOf(eps ...ep) []discoveryv1.Endpoint {
	var out []discoveryv1.Endpoint
	for _, e := range eps {
		w := builders.MakeEndpoint(e.addr)
		if e.node != "" {
			w.Node(e.node)
		}
		if e.flags != "-" {
			w.Conditions(strings.Contains(e.flags, "r"), strings.Contains(e.flags, "s"), strings.Contains(e.flags, "t"))
		}
		if e.zoneHints != nil {
			w.ZoneHints(e.zoneHints...)
		}
		out = append(out, w.Obj())
	}
	return out
}

func v4(port int32, eps ...ep) *discoveryv1.EndpointSlice {
	return slice("web-v4", discoveryv1.AddressTypeIPv4, port, eps...)
}

// dpEps renders "ip:port" or "ip:port*" (local) endpoints.
func dpEps(specs ...string) []dataplane.Endpoint {
	out := []dataplane.Endpoint{}
	for _, s := range specs {
		local := strings.HasSuffix(s, "*")
		out = append(out, dataplane.Endpoint{Addr: netip.MustParseAddrPort(strings.TrimSuffix(s, "*")), Local: local})
	}
	return out
}

func addrs(ips ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ips))
	for _, s := range ips {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func httpPort(endpoints []dataplane.Endpoint) dataplane.Port {
	return dataplane.Port{Name: "http", Protocol: dataplane.TCP, Port: 80, Endpoints: endpoints}
}

func webService(ports ...dataplane.Port) dataplane.Service {
	return dataplane.Service{Namespace: "ns", Name: "web", ClusterIPs: addrs("10.0.0.10"), Ports: ports}
}

func TestConvert(t *testing.T) {
	hinted := func(zones ...string) []string { return zones }
	three := []ep{
		{"10.1.0.1", "node-a", "rs", hinted("zone-a")},
		{"10.1.0.2", "node-b", "rs", hinted("zone-b")},
		{"10.1.0.3", "node-c", "rs", hinted("zone-a")},
	}
	importOf := func(typ mcsv1beta1.ServiceImportType, ips ...string) *mcsv1beta1.ServiceImport {
		return &mcsv1beta1.ServiceImport{Spec: mcsv1beta1.ServiceImportSpec{Type: typ, IPs: ips}}
	}
	tests := []struct {
		name         string
		in           ServiceInputs
		node         selection.Node
		want         dataplane.Service
		wantSkip     string
		wantProblems int
		wantNoLocal  [2]bool
	}{
		{
			name: "endpoints of every ready endpoint, target port from the slice, unset conditions mean ready",
			in: ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{v4(8080,
				ep{"10.1.0.1", "node-a", "-", nil}, ep{"10.1.0.2", "node-b", "rs", nil}, ep{"10.1.0.3", "", "s", nil})}},
			want: webService(httpPort(dpEps("10.1.0.1:8080*", "10.1.0.2:8080"))),
		},
		{
			name: "zone hints honoured for this node's zone",
			in:   ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{v4(8080, three...)}},
			want: webService(httpPort(dpEps("10.1.0.1:8080*", "10.1.0.3:8080"))),
		},
		{
			name: "zone hints ignored on a node without a zone",
			in:   ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{v4(8080, three...)}},
			node: selection.Node{Name: "node-a"},
			want: webService(httpPort(dpEps("10.1.0.1:8080*", "10.1.0.2:8080", "10.1.0.3:8080"))),
		},
		{
			name: "zone hints ignored when one ready endpoint lacks them",
			in: ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{v4(8080,
				append(slices.Clone(three), ep{"10.1.0.4", "node-d", "rs", nil})...)}},
			want: webService(httpPort(dpEps("10.1.0.1:8080*", "10.1.0.2:8080", "10.1.0.3:8080", "10.1.0.4:8080"))),
		},
		{
			name: "internalTrafficPolicy Local keeps this node's endpoints",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}), Slices: []*discoveryv1.EndpointSlice{v4(8080, three...)}},
			want: webService(httpPort(dpEps("10.1.0.1:8080*"))),
		},
		{
			name: "internalTrafficPolicy Local without a local endpoint",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
			}), Slices: []*discoveryv1.EndpointSlice{v4(8080, three[1])}},
			want:        webService(httpPort(dpEps())),
			wantNoLocal: [2]bool{true, false},
		},
		{
			name: "externalTrafficPolicy Local: NodePort to local endpoints, ClusterIP to all",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.Ports[0].NodePort = 30080
			}), Slices: []*discoveryv1.EndpointSlice{v4(8080, ep{"10.1.0.1", "node-a", "rs", nil}, ep{"10.1.0.2", "node-b", "rs", nil})}},
			want: webService(dataplane.Port{Name: "http", Protocol: dataplane.TCP, Port: 80, NodePort: 30080,
				Endpoints:     dpEps("10.1.0.1:8080*", "10.1.0.2:8080"),
				ExternalLocal: true, ExternalEndpoints: dpEps("10.1.0.1:8080*")}),
		},
		{
			name: "externalTrafficPolicy Local without a local endpoint",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.Ports[0].NodePort = 30080
			}), Slices: []*discoveryv1.EndpointSlice{v4(8080, ep{"10.1.0.2", "node-b", "rs", nil})}},
			want: webService(dataplane.Port{Name: "http", Protocol: dataplane.TCP, Port: 80, NodePort: 30080,
				Endpoints: dpEps("10.1.0.2:8080"), ExternalLocal: true, ExternalEndpoints: dpEps()}),
			wantNoLocal: [2]bool{false, true},
		},
		{
			name: "no ready endpoint: fall back to serving and terminating ones",
			in: ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{v4(8080,
				ep{"10.1.0.1", "node-a", "st", nil}, ep{"10.1.0.2", "node-b", "t", nil}, ep{"10.1.0.3", "node-b", "", nil})}},
			want: webService(httpPort(dpEps("10.1.0.1:8080*"))),
		},
		{
			name: "no endpoints at all gives an empty list, which the dataplane rejects",
			in:   ServiceInputs{Service: svc()},
			want: webService(httpPort(dpEps())),
		},
		{
			name: "a slice without the Service port's name or protocol does not count",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
			}), Slices: []*discoveryv1.EndpointSlice{v4(8080, ep{"10.1.0.1", "", "rs", nil}), func() *discoveryv1.EndpointSlice {
				s := slice("web-dns", discoveryv1.AddressTypeIPv4, 5353, ep{"10.1.0.9", "", "rs", nil})
				s.Ports[0].Name = ptr.To("dns")
				s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](53)})
				return s
			}()}},
			want: webService(httpPort(dpEps("10.1.0.1:8080")),
				dataplane.Port{Name: "dns", Protocol: dataplane.UDP, Port: 53, Endpoints: dpEps("10.1.0.9:53")}),
		},
		{
			name: "FQDN slices, unparsable addresses and slice ports without a number are left out",
			in: ServiceInputs{Service: svc(), Slices: []*discoveryv1.EndpointSlice{
				slice("fqdn", discoveryv1.AddressTypeFQDN, 8080, ep{"example.com", "", "rs", nil}),
				slice("bad", discoveryv1.AddressTypeIPv4, 8080, ep{"10.1.0.300", "", "rs", nil}, ep{"10.1.0.5", "", "rs", nil}),
				func() *discoveryv1.EndpointSlice {
					s := slice("noport", discoveryv1.AddressTypeIPv4, 8080, ep{"10.1.0.6", "", "rs", nil})
					s.Ports[0].Port = nil
					return s
				}(),
			}},
			want:         webService(httpPort(dpEps("10.1.0.5:8080"))),
			wantProblems: 1,
		},
		{
			name: "dual-stack: both families' IPs and endpoints",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) { s.Spec.ClusterIPs = []string{"10.0.0.10", "fd00:10::a"} }),
				Slices: []*discoveryv1.EndpointSlice{v4(8080, ep{"10.1.0.1", "", "rs", nil}),
					slice("web-v6", discoveryv1.AddressTypeIPv6, 8080, ep{"fd00:1::1", "", "rs", nil})}},
			want: dataplane.Service{Namespace: "ns", Name: "web", ClusterIPs: addrs("10.0.0.10", "fd00:10::a"),
				Ports: []dataplane.Port{httpPort(dpEps("10.1.0.1:8080", "[fd00:1::1]:8080"))}},
		},
		{
			name: "ServiceImport IPs that differ become extra cluster IPs, once",
			in:   ServiceInputs{Service: svc(), Import: importOf(mcsv1beta1.ClusterSetIP, "10.0.0.10", "10.96.5.5", "10.96.5.5")},
			want: dataplane.Service{Namespace: "ns", Name: "web", ClusterIPs: addrs("10.0.0.10", "10.96.5.5"),
				Ports: []dataplane.Port{httpPort(dpEps())}},
		},
		{
			name:         "an invalid ServiceImport IP is reported and left out",
			in:           ServiceInputs{Service: svc(), Import: importOf(mcsv1beta1.ClusterSetIP, "not-an-ip")},
			want:         webService(httpPort(dpEps())),
			wantProblems: 1,
		},
		{
			name: "a Headless ServiceImport lends no IPs",
			in:   ServiceInputs{Service: svc(), Import: importOf(mcsv1beta1.Headless, "10.96.5.5")},
			want: webService(httpPort(dpEps())),
		},
		{
			name: "ClientIP affinity with the default timeout",
			in:   ServiceInputs{Service: svc(func(s *corev1.Service) { s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP })},
			want: func() dataplane.Service {
				s := webService(httpPort(dpEps()))
				s.AffinityTimeout = 10800 * time.Second
				return s
			}(),
		},
		{
			name: "ClientIP affinity with its own timeout",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
			})},
			want: func() dataplane.Service {
				s := webService(httpPort(dpEps()))
				s.AffinityTimeout = time.Minute
				return s
			}(),
		},
		{
			name: "an unsupported protocol drops only that port",
			in: ServiceInputs{Service: svc(func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "odd", Protocol: "QUIC", Port: 443})
			})},
			want:         webService(httpPort(dpEps())),
			wantProblems: 1,
		},
		{
			name:     "ExternalName Services are skipped",
			in:       ServiceInputs{Service: svc(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName })},
			wantSkip: "ExternalName Service",
		},
		{
			name:     "headless Services are skipped",
			in:       ServiceInputs{Service: svc(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "None", []string{"None"} })},
			wantSkip: "headless Service",
		},
		{
			name:     "a Service without a cluster IP yet is skipped",
			in:       ServiceInputs{Service: svc(func(s *corev1.Service) { s.Spec.ClusterIP, s.Spec.ClusterIPs = "", nil })},
			wantSkip: "no cluster IP",
		},
		{
			name:     "no Service at all",
			wantSkip: "no Service",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := tt.node
			if node == (selection.Node{}) {
				node = thisNode
			}
			got := Convert(tt.in, node)
			if got.Skip != tt.wantSkip {
				t.Fatalf("Skip = %q, want %q", got.Skip, tt.wantSkip)
			}
			if len(got.Problems) != tt.wantProblems {
				t.Errorf("Problems = %q, want %d of them", got.Problems, tt.wantProblems)
			}
			if [2]bool{got.NoLocalInternal, got.NoLocalExternal} != tt.wantNoLocal {
				t.Errorf("NoLocal (internal, external) = %v, %v, want %v", got.NoLocalInternal, got.NoLocalExternal, tt.wantNoLocal)
			}
			if tt.wantSkip != "" {
				return
			}
			if !reflect.DeepEqual(got.Service, tt.want) {
				t.Errorf("Service =\n%+v\nwant\n%+v", got.Service, tt.want)
			}
		})
	}
}

func TestConvertedServicesAreAcceptedByTheDataplane(t *testing.T) {
	// Everything Convert produces for valid input must render.
	in := ServiceInputs{Service: svc(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	}), Slices: []*discoveryv1.EndpointSlice{v4(8080, ep{"10.1.0.1", "node-a", "rs", nil}, ep{"10.1.0.2", "node-b", "rs", nil})}}
	c := Convert(in, thisNode)
	if c.Skip != "" {
		t.Fatalf("skipped: %s", c.Skip)
	}
	ruleset, stats, err := dataplane.Render(t.Context(), []dataplane.Service{c.Service}, dataplane.Options{})
	if err != nil || len(stats.Rejected) > 0 {
		t.Fatalf("Render: %v, rejected %v", err, stats.Rejected)
	}
	for _, want := range []string{"10.0.0.10 . tcp . 80", "tcp . 30080", ": 10.1.0.1 . 8080", ": 10.1.0.2 . 8080"} {
		if !strings.Contains(ruleset, want) {
			t.Errorf("ruleset lacks %q:\n%s", want, ruleset)
		}
	}
}
