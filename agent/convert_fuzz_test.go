package agent

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
)

// fuzzInputs decodes bytes into a Service with up to three ports and up to
// three slices of up to eight endpoints each, drawn from small vocabularies
// so that names, zones and ports collide often.
func fuzzInputs(data []byte) ServiceInputs {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	names := []string{"", "http", "dns"}
	protocols := []corev1.Protocol{"", corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP, "QUIC"}
	nodes := []string{"", "node-a", "node-b"}
	zones := []string{"zone-a", "zone-b"}
	addresses := []string{"10.1.0.1", "10.1.0.2", "10.1.0.3", "fd00::1", "not-an-ip", "10.1.0.1"}

	flags := next()
	svc := svc(func(s *corev1.Service) {
		s.Spec.Ports = nil
		if flags&1 != 0 {
			s.Spec.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		}
		if flags&2 != 0 {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		if flags&4 != 0 {
			s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		}
		if flags&8 != 0 {
			s.Spec.ClusterIPs = append(s.Spec.ClusterIPs, "fd00:10::a")
		}
	})
	for i := range int(next() % 4) {
		b := next()
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: names[int(b)%len(names)], Protocol: protocols[int(b>>2)%len(protocols)],
			Port: int32(next()) - 8, NodePort: int32(30000+i) * int32(b>>7),
		})
	}
	in := ServiceInputs{Service: svc}
	for s := range int(next() % 4) {
		b := next()
		types := []discoveryv1.AddressType{discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN}
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", s)}, AddressType: types[int(b)%len(types)]}
		for range int(next() % 3) {
			pb := next()
			port := &discoveryv1.EndpointPort{Name: ptr.To(names[int(pb)%len(names)]), Port: ptr.To(int32(next()) - 8)}
			if pb&0x80 != 0 {
				port.Protocol = ptr.To(protocols[int(pb>>2)%len(protocols)])
			}
			sl.Ports = append(sl.Ports, *port)
		}
		for range int(next() % 9) {
			eb, hb := next(), next()
			ep := discoveryv1.Endpoint{Addresses: []string{addresses[int(eb)%len(addresses)]}}
			if n := nodes[int(eb>>3)%len(nodes)]; n != "" {
				ep.NodeName = ptr.To(n)
			}
			if hb&1 == 0 {
				ep.Conditions = discoveryv1.EndpointConditions{Ready: ptr.To(hb&2 != 0), Serving: ptr.To(hb&4 != 0), Terminating: ptr.To(hb&8 != 0)}
			}
			if hb&16 != 0 {
				ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zones[int(hb>>5)%len(zones)]}}}
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		in.Slices = append(in.Slices, sl)
	}
	return in
}

// FuzzConvert checks that conversion never panics and never invents
// anything: every endpoint it returns is an address and port some slice
// lists for that Service port, marked Local exactly when it is on this node.
func FuzzConvert(f *testing.F) {
	f.Add([]byte{0, 1, 0x05, 80, 1, 0, 1, 0x05, 88, 3, 0, 2, 8, 2})
	f.Add([]byte{3, 2, 0x81, 80, 0x85, 53, 3, 1, 2, 0x01, 80, 8, 1, 0x12, 9, 0x16, 2, 0x36})
	f.Add([]byte{7, 3, 1, 200, 2, 1, 3, 0, 0, 1, 1, 8, 10, 18, 11, 50})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzInputs(data)
		for _, node := range []selection.Node{{Name: "node-a", Zone: "zone-a"}, {Name: "node-b"}, {}} {
			c := Convert(in, node)
			if c.Skip != "" {
				continue
			}
			if len(c.Service.Ports) > len(in.Service.Spec.Ports) {
				t.Fatalf("%d ports out of %d in", len(c.Service.Ports), len(in.Service.Spec.Ports))
			}
			// Two slices may list one address on different nodes.
			listed := map[netip.AddrPort]map[string]bool{}
			for _, sl := range in.Slices {
				for _, p := range sl.Ports {
					if p.Port == nil {
						continue
					}
					for _, ep := range sl.Endpoints {
						if ip, err := netip.ParseAddr(ep.Addresses[0]); err == nil && *p.Port > 0 && *p.Port < 65536 {
							key := netip.AddrPortFrom(ip, uint16(*p.Port))
							if listed[key] == nil {
								listed[key] = map[string]bool{}
							}
							listed[key][ptr.Deref(ep.NodeName, "")] = true
						}
					}
				}
			}
			for _, p := range c.Service.Ports {
				for _, group := range [][]dataplane.Endpoint{p.Endpoints, p.ExternalEndpoints} {
					for _, ep := range group {
						nodeNames, ok := listed[ep.Addr]
						if !ok {
							t.Fatalf("port %q: endpoint %v is in no slice", p.Name, ep.Addr)
						}
						if ep.Local && (node.Name == "" || !nodeNames[node.Name]) {
							t.Fatalf("endpoint %v on nodes %v is Local on node %q", ep.Addr, nodeNames, node.Name)
						}
						if !ep.Local && node.Name != "" && len(nodeNames) == 1 && nodeNames[node.Name] {
							t.Fatalf("endpoint %v on this node %q is not Local", ep.Addr, node.Name)
						}
					}
				}
				if !p.ExternalLocal && len(p.ExternalEndpoints) > 0 {
					t.Fatalf("port %q: external endpoints without ExternalLocal", p.Name)
				}
			}
		}
	})
}
