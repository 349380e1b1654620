package clusterset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/kubernetes"
	"github.com/coredns/coredns/plugin/kubernetes/object"
	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"
	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// clusterAPI is what CoreDNS's kubernetes plugin reads, held in memory: the Services and
// EndpointSlices of one cluster, converted by the plugin's own object package.
type clusterAPI struct {
	services  []*object.Service
	endpoints []*object.Endpoints
}

func (a *clusterAPI) ServiceList() []*object.Service             { return a.services }
func (a *clusterAPI) EndpointsList() []*object.Endpoints         { return a.endpoints }
func (a *clusterAPI) ServiceImportList() []*object.ServiceImport { return nil }
func (a *clusterAPI) SvcIndex(key string) []*object.Service {
	return filter(a.services, func(s *object.Service) bool { return s.Index == key })
}
func (a *clusterAPI) SvcIndexReverse(ip string) []*object.Service {
	return filter(a.services, func(s *object.Service) bool { return slices.Contains(s.ClusterIPs, ip) })
}
func (a *clusterAPI) SvcExtIndexReverse(string) []*object.Service      { return nil }
func (a *clusterAPI) SvcImportIndex(string) []*object.ServiceImport    { return nil }
func (a *clusterAPI) PodIndex(string) []*object.Pod                    { return nil }
func (a *clusterAPI) McEpIndex(string) []*object.MultiClusterEndpoints { return nil }
func (a *clusterAPI) GetNodeByName(context.Context, string) (*corev1.Node, error) {
	return nil, errors.New("no nodes")
}
func (a *clusterAPI) EpIndex(key string) []*object.Endpoints {
	return filter(a.endpoints, func(e *object.Endpoints) bool { return e.Index == key })
}
func (a *clusterAPI) EpIndexReverse(ip string) []*object.Endpoints {
	return filter(a.endpoints, func(e *object.Endpoints) bool { return slices.Contains(e.IndexIP, ip) })
}
func (a *clusterAPI) GetNamespaceByName(name string) (*object.Namespace, error) {
	if name != "demo" {
		return nil, errors.New("no such namespace")
	}
	return &object.Namespace{Name: name}, nil
}
func (a *clusterAPI) Run()                                   {}
func (a *clusterAPI) HasSynced() bool                        { return true }
func (a *clusterAPI) Stop() error                            { return nil }
func (a *clusterAPI) Modified(kubernetes.ModifiedMode) int64 { return 1 }

func filter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// parityObjects are one cluster's Services and EndpointSlices (what the kubernetes plugin reads)
// and the same Services as the member importing them from cluster "east" sees them (what the
// clusterset plugin reads).
func parityObjects() (services []*corev1.Service, local []*discoveryv1.EndpointSlice, imports []*mcsv1beta1.ServiceImport, imported []*discoveryv1.EndpointSlice) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "demo", Name: name} }
	webPorts := []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53},
	}
	services = []*corev1.Service{
		{ObjectMeta: meta("web"), Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.0.0.10", "fd00:10::10"}, Ports: webPorts}},
		{ObjectMeta: meta("solo"), Spec: corev1.ServiceSpec{ClusterIPs: []string{"10.0.0.11"}, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 8080}}}},
		{ObjectMeta: meta("db"), Spec: corev1.ServiceSpec{ClusterIPs: []string{corev1.ClusterIPNone}, Ports: []corev1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}}},
	}
	for _, svc := range services[:2] {
		var ports []mcsv1beta1.ServicePort
		for _, p := range svc.Spec.Ports {
			ports = append(ports, mcsv1beta1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port})
		}
		imports = append(imports, &mcsv1beta1.ServiceImport{ObjectMeta: svc.ObjectMeta, Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP, IPs: svc.Spec.ClusterIPs, Ports: ports}})
	}
	imports = append(imports, &mcsv1beta1.ServiceImport{ObjectMeta: meta("db"), Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.Headless, Ports: []mcsv1beta1.ServicePort{{Name: "pg", Protocol: corev1.ProtocolTCP, Port: 5432}}}})

	dbPorts := []discoveryv1.EndpointPort{
		{Name: ptr.To("pg"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](5432)},
		{Name: ptr.To(""), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](9187)},
	}
	notReady := discoveryv1.EndpointConditions{Ready: ptr.To(false)}
	local = []*discoveryv1.EndpointSlice{
		{ObjectMeta: meta("db-v4"), AddressType: discoveryv1.AddressTypeIPv4, Ports: dbPorts, Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.1.0.5"}, Hostname: ptr.To("db-0")},
			{Addresses: []string{"10.1.0.6"}},
			{Addresses: []string{"10.1.0.7"}, Conditions: notReady},
		}},
		{ObjectMeta: meta("db-v6"), AddressType: discoveryv1.AddressTypeIPv6, Ports: dbPorts, Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"fd00:1::5"}, Hostname: ptr.To("db-0")},
			{Addresses: []string{"fd00:1::"}},
		}},
	}
	for _, s := range local {
		s.Labels = map[string]string{discoveryv1.LabelServiceName: "db"}
		in := s.DeepCopy()
		in.Name = "imported-" + s.Name
		in.Labels = map[string]string{mcsv1beta1.LabelServiceName: "db", mcsv1beta1.LabelSourceCluster: "east"}
		imported = append(imported, in)
	}
	return services, local, imports, imported
}

// clustersetName is where a cluster.local name of the kubernetes plugin lives in the clusterset
// zone: the zone swapped, and an endpoint's name given the cluster it came from.
func clustersetName(name string) string {
	rel, ok := strings.CutSuffix(name, ".svc.cluster.local.")
	if !ok {
		return name
	}
	if labels := strings.Split(rel, "."); len(labels) == 3 && !strings.HasPrefix(labels[0], "_") {
		rel = labels[0] + ".east." + labels[1] + "." + labels[2]
	}
	return rel + ".svc.clusterset.local."
}

// comparable renders a reply for comparison with names moved into the clusterset zone. SRV
// priority and weight are left out: the specification leaves them open, the kubernetes plugin
// derives a weight from how many records it merged, and this plugin answers 0 0 (checked
// separately).
func comparable(m *dns.Msg) string {
	section := func(rrs []dns.RR) []string {
		var out []string
		for _, rr := range rrs {
			var s string
			switch r := rr.(type) {
			case *dns.A:
				s = "A " + r.A.String()
			case *dns.AAAA:
				s = "AAAA " + r.AAAA.String()
			case *dns.SRV:
				s = fmt.Sprintf("SRV %d %s", r.Port, clustersetName(r.Target))
			case *dns.PTR:
				s = "PTR " + clustersetName(r.Ptr)
			case *dns.SOA:
				continue // each zone has its own
			default:
				s = rr.String()
			}
			out = append(out, fmt.Sprintf("%s %d %s", clustersetName(rr.Header().Name), rr.Header().Ttl, s))
		}
		slices.Sort(out)
		return out
	}
	return fmt.Sprintf("%s answer=%q extra=%q", dns.RcodeToString[m.Rcode], section(m.Answer), section(m.Extra))
}

func ask(t *testing.T, h interface {
	ServeDNS(context.Context, dns.ResponseWriter, *dns.Msg) (int, error)
}, name string, qtype uint16) *dns.Msg {
	t.Helper()
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	if _, err := h.ServeDNS(context.Background(), rec, new(dns.Msg).SetQuestion(name, qtype)); err != nil || rec.Msg == nil {
		t.Fatalf("%s %s: %v, reply %v", name, dns.TypeToString[qtype], err, rec.Msg)
	}
	return rec.Msg
}

// TestAnswersAsKubernetesPluginDoes runs CoreDNS's kubernetes plugin (v1.15.0, in process, over
// the Services and slices of one cluster) beside this plugin (over the same Services imported
// from that cluster) and asks both the same questions, each in its own zone: the answers must
// be the same records once names are moved into the clusterset zone.
func TestAnswersAsKubernetesPluginDoes(t *testing.T) {
	services, local, imports, imported := parityObjects()
	api := &clusterAPI{}
	for _, s := range services {
		obj, err := object.ToService(s.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		api.services = append(api.services, obj.(*object.Service))
	}
	for _, s := range local {
		obj, err := object.EndpointSliceToEndpoints(s.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		api.endpoints = append(api.endpoints, obj.(*object.Endpoints))
	}
	k := kubernetes.New([]string{"cluster.local.", "in-addr.arpa.", "ip6.arpa."})
	k.APIConn = api

	store := NewStore()
	for _, imp := range imports {
		store.setImport(imp)
	}
	for _, s := range imported {
		store.setSlice(s)
	}
	store.synced.Store(true)
	c := &Clusterset{Zones: []string{"clusterset.local.", "in-addr.arpa.", "ip6.arpa."}, TTL: DefaultTTL, Store: store}

	reverse := func(addr string) string { name, _ := dns.ReverseAddr(addr); return name }
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.demo.svc.cluster.local.", dns.TypeSRV},  // one per port, the Service name as target
		{"solo.demo.svc.cluster.local.", dns.TypeSRV}, // an unnamed port too
		{"db.demo.svc.cluster.local.", dns.TypeSRV},   // one per endpoint and port, unnamed ports too
		{"_http._tcp.web.demo.svc.cluster.local.", dns.TypeSRV},
		{"_dns._udp.web.demo.svc.cluster.local.", dns.TypeSRV},
		{"_pg._tcp.db.demo.svc.cluster.local.", dns.TypeSRV},
		{"_pg._udp.db.demo.svc.cluster.local.", dns.TypeSRV},
		{"web.demo.svc.cluster.local.", dns.TypeA},
		{"web.demo.svc.cluster.local.", dns.TypeAAAA},
		{"db.demo.svc.cluster.local.", dns.TypeA},
		{"db.demo.svc.cluster.local.", dns.TypeAAAA},
		{"db-0.db.demo.svc.cluster.local.", dns.TypeA},
		{"db-0.db.demo.svc.cluster.local.", dns.TypeAAAA},
		{"10-1-0-6.db.demo.svc.cluster.local.", dns.TypeA},     // the name of an endpoint without hostname
		{"fd00-1--0.db.demo.svc.cluster.local.", dns.TypeAAAA}, // ... ending in "::"
		{"10-1-0-7.db.demo.svc.cluster.local.", dns.TypeA},     // not ready: no name
		{"nope.demo.svc.cluster.local.", dns.TypeA},
		{reverse("10.0.0.10"), dns.TypePTR},
		{reverse("fd00:10::10"), dns.TypePTR},
		{reverse("10.1.0.6"), dns.TypePTR},
		{reverse("fd00:1::5"), dns.TypePTR},
		{reverse("10.1.0.7"), dns.TypePTR},
	} {
		t.Run(dns.TypeToString[q.qtype]+" "+q.name, func(t *testing.T) {
			theirs := ask(t, k, q.name, q.qtype)
			ours := ask(t, c, clustersetName(q.name), q.qtype)
			if comparable(ours) != comparable(theirs) {
				t.Fatalf("kubernetes plugin: %s\nclusterset plugin: %s", comparable(theirs), comparable(ours))
			}
			for _, rr := range ours.Answer {
				if s, ok := rr.(*dns.SRV); ok && (s.Priority != 0 || s.Weight != 0) {
					t.Errorf("SRV %v: want priority and weight 0", s)
				}
			}
		})
	}

	// Where the two differ on purpose: names with only names below them exist here (RFC
	// 8020), and each zone publishes the version of its own specification.
	for _, d := range []struct {
		name                 string
		qtype                uint16
		theirRcode, ourRcode int
	}{
		{"_tcp.web.demo.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, dns.RcodeSuccess},
		{"_tcp.db.demo.svc.cluster.local.", dns.TypeSRV, dns.RcodeNameError, dns.RcodeSuccess},
	} {
		theirs, ours := ask(t, k, d.name, d.qtype), ask(t, c, clustersetName(d.name), d.qtype)
		if theirs.Rcode != d.theirRcode || ours.Rcode != d.ourRcode || len(ours.Answer) != 0 {
			t.Errorf("%s: kubernetes plugin %s, clusterset plugin %s %v; want %s and %s", d.name,
				dns.RcodeToString[theirs.Rcode], dns.RcodeToString[ours.Rcode], ours.Answer, dns.RcodeToString[d.theirRcode], dns.RcodeToString[d.ourRcode])
		}
	}
	if theirs, ours := ask(t, k, "dns-version.cluster.local.", dns.TypeTXT), ask(t, c, "dns-version.clusterset.local.", dns.TypeTXT); len(theirs.Answer) != 1 || len(ours.Answer) != 1 ||
		theirs.Answer[0].(*dns.TXT).Txt[0] != "1.1.0" || ours.Answer[0].(*dns.TXT).Txt[0] != "1.0.0" || theirs.Answer[0].Header().Ttl != ours.Answer[0].Header().Ttl {
		t.Errorf("dns-version: kubernetes plugin %v, clusterset plugin %v; want 1.1.0 and 1.0.0, same TTL", theirs.Answer, ours.Answer)
	}
}
