package agent

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
)

// maxName is a name of n characters, valid as a DNS label when n <= 63.
func maxName(prefix string, n int) string {
	return prefix + strings.Repeat("x", n-len(prefix))
}

// shapeInputs decodes bytes into the shapes issue 13 lists as bad input for the agent:
// IPv6-only, dual-stack and multi-address endpoints, 100 ports, 10,000 endpoints, names at
// their maximum lengths (63-character namespace and Service, 253-character slice names,
// 15-character port names) and ports that conflict.
func shapeInputs(data []byte) ServiceInputs {
	// The bytes repeat, so that a short input still decides every one of 10,000 endpoints.
	pos := 0
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[pos%len(data)]
		pos++
		return b
	}
	flags, sizes := next(), next()
	ns, name := "shop", "web"
	if flags&1 != 0 {
		ns, name = maxName("n", 63), maxName("s", 63)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	switch (flags >> 1) % 3 {
	case 0:
		svc.Spec.ClusterIPs = []string{"10.96.0.10"}
	case 1:
		svc.Spec.ClusterIPs = []string{"fd00:96::10"}
	default:
		svc.Spec.ClusterIPs = []string{"fd00:96::10", "10.96.0.10"}
	}
	svc.Spec.ClusterIP = svc.Spec.ClusterIPs[0]
	if flags&8 != 0 {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	if flags&16 != 0 {
		svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	}
	ports := []int{1, 3, 100}[int(sizes)%3]
	for i := range ports {
		portName := fmt.Sprintf("p%d", i)
		if flags&1 != 0 {
			portName = maxName(portName+"-", 15)
		}
		sp := corev1.ServicePort{Name: portName, Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)}
		if flags&32 != 0 && i == ports-1 && i > 0 {
			sp.Port = 1000 // conflicts with the first port
		}
		if flags&64 != 0 && i < 30 {
			sp.NodePort = int32(30000 + i)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, sp)
	}
	endpoints := []int{0, 7, 10000}[int(sizes>>2)%3]
	in := ServiceInputs{Service: svc}
	for start, s := 0, 0; start < endpoints; s++ {
		b := next()
		v6 := b&1 != 0
		sl := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, s)}, AddressType: discoveryv1.AddressTypeIPv4}
		if flags&1 != 0 {
			sl.Name = maxName(fmt.Sprintf("slice-%d-", s), 253)
		}
		if v6 {
			sl.AddressType = discoveryv1.AddressTypeIPv6
		}
		for i := 0; i < ports; i += 1 + int(b>>5) { // some ports have no endpoints
			sl.Ports = append(sl.Ports, discoveryv1.EndpointPort{Name: ptr.To(svc.Spec.Ports[i].Name),
				Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(int32(8000 + i))})
		}
		per := 1000 // the most a slice holds
		if endpoints < per {
			per = 4 // small Services still span slices, of both families
		}
		n := min(per, endpoints-start)
		for i := range n {
			c := next()
			ep := discoveryv1.Endpoint{Conditions: discoveryv1.EndpointConditions{
				Ready: ptr.To(c&1 != 0), Serving: ptr.To(c&2 != 0), Terminating: ptr.To(c&4 != 0)}}
			if c&8 != 0 {
				ep.NodeName = ptr.To("node-a")
			}
			own, other := shapeAddr(start+i, v6), shapeAddr(start+i, !v6)
			if b&2 != 0 && c&16 != 0 {
				own = other // an address of the wrong family for its slice
			}
			ep.Addresses = []string{own}
			for range int(c>>5) % 3 { // more addresses: only the first counts
				ep.Addresses = append(ep.Addresses, shapeAddr(start+i+50000, v6))
			}
			sl.Endpoints = append(sl.Endpoints, ep)
		}
		start += n
		in.Slices = append(in.Slices, sl)
	}
	return in
}

func shapeAddr(i int, v6 bool) string {
	if v6 {
		return fmt.Sprintf("fd00:244::%x", i+1)
	}
	return fmt.Sprintf("10.%d.%d.%d", 100+i/65536, (i/256)%256, i%256)
}

var objectNameRE = regexp.MustCompile(`^add (?:chain|set|map) ip6? fleetslice (\S+)`)

// FuzzConvertBadShapes checks, for every shape, that conversion and rendering never panic or
// fail, that each programmed endpoint is the first address of a ready (or, with none ready,
// serving and terminating) endpoint its Service's slices list for that port in that family,
// and that every object name fits nftables' limit.
func FuzzConvertBadShapes(f *testing.F) {
	// The second byte picks the sizes: ports [1, 3, 100][b%3], endpoints [0, 7, 10000][b>>2%3].
	f.Add([]byte{0, 4, 0, 3, 3, 3, 1, 3, 7, 6, 2})                             // IPv4, 1 port, 7 endpoints
	f.Add([]byte{1 | 4 | 32 | 64, 5, 1, 0x23, 0x43, 0x63, 0x0b, 0x13})         // max names, dual-stack, 100 ports (one conflicting), NodePorts
	f.Add([]byte{1 | 4 | 16, 5, 1, 0x23, 0x43, 0x63, 0x0b, 0x13})              // max names, dual-stack, 100 ports, affinity
	f.Add([]byte{2, 9, 1, 3, 3, 7, 6, 0x23, 0x45})                             // IPv6-only, 10,000 endpoints, multi-address
	f.Add([]byte{1 | 4, 10, 0, 3, 0x26, 1, 7, 0x3b, 2})                        // max names, dual-stack, 3 ports x 10,000 endpoints, wrong-family addresses
	f.Add([]byte{1 | 16 | 8, 1 | 8, 2, 0x19, 0x1b, 0x3f, 6, 6, 6, 0xff, 0xe1}) // affinity, ETP Local
	f.Add([]byte{4, 4, 0, 6, 6, 6, 6, 1, 3, 3, 3})                             // dual-stack: IPv4 only terminating, IPv6 ready
	f.Fuzz(func(t *testing.T, data []byte) {
		in := shapeInputs(data)
		node := selection.Node{Name: "node-a", Zone: "zone-a"}
		c := Convert(in, node)
		if c.Skip != "" {
			t.Fatalf("skipped: %s", c.Skip)
		}
		checkShapeEndpoints(t, in, c)
		// knftables' in-memory table, which Render uses, looks elements up one by one (10,000
		// endpoints take seconds); names and rejections do not depend on how many there are.
		rendered := c.Service
		rendered.Ports = slices.Clone(rendered.Ports)
		for i := range rendered.Ports {
			p := &rendered.Ports[i]
			p.Endpoints = p.Endpoints[:min(len(p.Endpoints), 500)]
			p.ExternalEndpoints = p.ExternalEndpoints[:min(len(p.ExternalEndpoints), 500)]
		}
		for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
			dump, stats, err := dataplane.Render(context.Background(), []dataplane.Service{rendered}, dataplane.Options{Family: fam})
			if err != nil {
				t.Fatalf("%s: render failed: %v", fam, err)
			}
			conflicting := false
			for i, a := range in.Service.Spec.Ports {
				for _, b := range in.Service.Spec.Ports[:i] {
					conflicting = conflicting || a.Port == b.Port
				}
			}
			inFamily := false
			for _, ip := range c.Service.ClusterIPs {
				inFamily = inFamily || ip.Is6() == (fam == knftables.IPv6Family)
			}
			if (conflicting && inFamily) != (len(stats.Rejected) == 1) {
				t.Fatalf("%s: conflicting ports %v, rejections %v", fam, conflicting, stats.Rejected)
			}
			for _, line := range strings.Split(dump, "\n") {
				if m := objectNameRE.FindStringSubmatch(line); m != nil && len(m[1]) >= unix.NFT_NAME_MAXLEN {
					t.Fatalf("%s: object name of %d bytes, nftables takes at most %d: %s", fam, len(m[1]), unix.NFT_NAME_MAXLEN-1, m[1])
				}
			}
		}
	})
}

// checkShapeEndpoints checks every endpoint of c against what in's slices list. Each family is
// judged on its own, as kube-proxy, which runs one proxier per family, judges it: the fallback
// to serving and terminating endpoints applies when that family has no ready one.
func checkShapeEndpoints(t *testing.T, in ServiceInputs, c Converted) {
	t.Helper()
	type candidate struct{ ready, usable bool }
	for _, p := range c.Service.Ports {
		listed := map[netip.AddrPort]candidate{}
		anyReady, anyUsable := map[bool]bool{}, map[bool]bool{} // by "is IPv6"
		for _, sl := range in.Slices {
			var number int32
			for _, sp := range sl.Ports {
				if *sp.Name == p.Name {
					number = *sp.Port
				}
			}
			if number == 0 {
				continue
			}
			for _, ep := range sl.Endpoints {
				ip, err := netip.ParseAddr(ep.Addresses[0])
				if err != nil || ip.Is6() != (sl.AddressType == discoveryv1.AddressTypeIPv6) {
					continue
				}
				ready := *ep.Conditions.Ready
				usable := ready || (*ep.Conditions.Serving && *ep.Conditions.Terminating)
				listed[netip.AddrPortFrom(ip, uint16(number))] = candidate{ready, usable}
				anyReady[ip.Is6()] = anyReady[ip.Is6()] || ready
				anyUsable[ip.Is6()] = anyUsable[ip.Is6()] || usable
			}
		}
		for gi, group := range [][]dataplane.Endpoint{p.Endpoints, p.ExternalEndpoints} {
			for _, ep := range group {
				cand, ok := listed[ep.Addr]
				switch {
				case !ok:
					t.Fatalf("port %q: endpoint %v is not the first address of an endpoint of its family for this port", p.Name, ep.Addr)
				case !cand.usable:
					t.Fatalf("port %q: endpoint %v is neither ready nor serving and terminating", p.Name, ep.Addr)
				case gi == 0 && anyReady[ep.Addr.Addr().Is6()] && !cand.ready:
					t.Fatalf("port %q: endpoint %v is not ready although its family has ready endpoints", p.Name, ep.Addr)
				}
			}
		}
		for _, v6 := range []bool{false, true} {
			if !anyUsable[v6] {
				continue
			}
			found := false
			for _, ep := range p.Endpoints {
				found = found || ep.Addr.Addr().Is6() == v6
			}
			if !found {
				t.Fatalf("port %q: usable endpoints of IPv6=%v exist but none is programmed", p.Name, v6)
			}
		}
	}
}
