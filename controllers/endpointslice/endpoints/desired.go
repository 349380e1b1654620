package endpoints

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	utilnet "k8s.io/utils/net"
)

// Set is the desired content of one slice set.
type Set struct {
	// Key identifies the set: KeyOf(AddressType, Ports). SliceKey gives the
	// same key for an existing slice of this set.
	Key         string
	AddressType discoveryv1.AddressType
	// Ports is sorted as SortPorts sorts; never nil.
	Ports []discoveryv1.EndpointPort
	// Endpoints is sorted by first address (numerically), then by the rest of
	// the endpoint's Identity; it holds each Identity once and is never empty.
	Endpoints []discoveryv1.Endpoint
}

// Result is the desired state of one Service plus what a reconciler needs to
// know about the Pods left out.
type Result struct {
	// Sets is sorted by Key. An address type with no endpoints has no set:
	// AddressTypes tells which address types need a placeholder slice.
	Sets []Set
	// PodsOnUnknownNodes lists, as "namespace/name" and sorted, the Pods left
	// out because their Node is not in the nodes map. Upstream returns an
	// error for them so that the Service is synced again once the Node shows
	// up (it may just be missing from a cache); a reconciler should requeue.
	PodsOnUnknownNodes []string
}

// Desired returns the slice sets svc should have, given the Pods its selector
// matches and the known Nodes by name. It is Build(...).Sets.
func Desired(svc *corev1.Service, pods []*Pod, nodes map[string]*corev1.Node) []Set {
	return Build(svc, pods, nodes).Sets
}

// Build computes the slice sets svc should have, given the Pods its selector
// matches and the known Nodes by name.
//
// Which Services have slices at all (not ExternalName, with a selector) and
// which Pods match the selector is the caller's business; Build trusts pods.
// Semantics, as upstream:
//   - one set per address type (AddressTypes) and resolved port list;
//   - a Pod is an endpoint unless it is in phase Succeeded or Failed or has no
//     IP; terminating Pods stay, with terminating=true;
//   - a Pod whose Node is not in nodes is left out (and reported) unless
//     spec.publishNotReadyAddresses is set, in which case it stays without a
//     zone. A nil nodes map therefore leaves out every Pod of such Services;
//   - endpoints with the same Identity (the same Pod listed twice) count
//     once; the first copy wins.
func Build(svc *corev1.Service, pods []*Pod, nodes map[string]*corev1.Node) Result {
	if svc == nil {
		return Result{}
	}
	addressTypes := AddressTypes(svc)
	b := builder{svc: svc, groups: map[string]*group{}}
	var unknownNodes []string
	for _, pod := range pods {
		if pod == nil || !pod.Candidate {
			continue
		}
		node := nodes[pod.NodeName]
		if node == nil && !svc.Spec.PublishNotReadyAddresses {
			unknownNodes = append(unknownNodes, pod.Namespace+"/"+pod.Name)
			continue
		}
		b.resolved = resolvePorts(svc, pod, b.resolved)
		for _, addressType := range addressTypes {
			addresses := podAddresses(pod, addressType)
			if len(addresses) == 0 {
				continue
			}
			b.add(addressType, podEndpoint(pod, node, svc, addresses))
		}
	}
	slices.Sort(unknownNodes)
	return Result{Sets: b.sets(), PodsOnUnknownNodes: slices.Compact(unknownNodes)}
}

// AddressTypes returns the address types svc's endpoints have, IPv4 first.
//
// They come from spec.ipFamilies. A Service without families (written through
// an API server too old to default them) gets the family of its ClusterIP, or
// both families when it is headless, so that its traffic keeps flowing until
// the field is defaulted. Every address type listed needs at least one slice:
// a placeholder when it has no endpoints.
func AddressTypes(svc *corev1.Service) []discoveryv1.AddressType {
	if svc == nil {
		return nil
	}
	var v4, v6 bool
	for _, family := range svc.Spec.IPFamilies {
		switch family {
		case corev1.IPv4Protocol:
			v4 = true
		case corev1.IPv6Protocol:
			v6 = true
		}
	}
	if !v4 && !v6 {
		clusterIP := svc.Spec.ClusterIP
		switch {
		case clusterIP == "" || clusterIP == corev1.ClusterIPNone:
			v4, v6 = true, true
		case utilnet.IsIPv6String(clusterIP):
			v6 = true
		default:
			v4 = true
		}
	}
	var types []discoveryv1.AddressType
	if v4 {
		types = append(types, discoveryv1.AddressTypeIPv4)
	}
	if v6 {
		types = append(types, discoveryv1.AddressTypeIPv6)
	}
	return types
}

// group collects the endpoints of one address type whose Pods resolved the
// Service's ports to the same numbers.
type group struct {
	addressType discoveryv1.AddressType
	resolved    []int64
	endpoints   []discoveryv1.Endpoint
}

type builder struct {
	svc      *corev1.Service
	groups   map[string]*group
	order    []*group
	resolved []int64
	scratch  []byte
}

// add files ep under its address type and the ports last resolved. Grouping
// by the raw resolved numbers avoids building and hashing a port list per
// Pod; Pods of one template all land in the same group.
func (b *builder) add(addressType discoveryv1.AddressType, ep discoveryv1.Endpoint) {
	b.scratch = append(b.scratch[:0], addressType...)
	for _, number := range b.resolved {
		b.scratch = append(b.scratch, ',')
		b.scratch = strconv.AppendInt(b.scratch, number, 10)
	}
	g := b.groups[string(b.scratch)]
	if g == nil {
		g = &group{addressType: addressType, resolved: slices.Clone(b.resolved)}
		b.groups[string(b.scratch)] = g
		b.order = append(b.order, g)
	}
	g.endpoints = append(g.endpoints, ep)
}

// sets turns groups into Sets. Two groups can yield the same port list only
// for an invalid Service (two ports with one name), so they are merged by Key
// rather than trusted to be distinct.
func (b *builder) sets() []Set {
	byKey := map[string]*Set{}
	var keys []string
	for _, g := range b.order {
		ports := SortPorts(endpointPorts(b.svc, g.resolved))
		key := KeyOf(g.addressType, ports)
		set := byKey[key]
		if set == nil {
			set = &Set{Key: key, AddressType: g.addressType, Ports: ports}
			byKey[key] = set
			keys = append(keys, key)
		}
		set.Endpoints = append(set.Endpoints, g.endpoints...)
	}
	slices.Sort(keys)
	out := make([]Set, 0, len(keys))
	for _, key := range keys {
		set := byKey[key]
		set.Endpoints = sortUnique(set.Endpoints)
		out = append(out, *set)
	}
	return out
}

// sortUnique keeps the first of any endpoints that share an Identity and
// sorts the rest by first address (numerically, so 10.0.0.9 precedes
// 10.0.0.10), then by Identity.
func sortUnique(eps []discoveryv1.Endpoint) []discoveryv1.Endpoint {
	type item struct {
		addr netip.Addr
		id   Identity
		ep   *discoveryv1.Endpoint
	}
	seen := make(map[Identity]struct{}, len(eps))
	items := make([]item, 0, len(eps))
	for i := range eps {
		id := IdentityOf(&eps[i])
		if _, dup := seen[id]; dup {
			continue
		}
		seen[id] = struct{}{}
		addr, _ := netip.ParseAddr(eps[i].Addresses[0])
		items = append(items, item{addr: addr, id: id, ep: &eps[i]})
	}
	slices.SortFunc(items, func(a, b item) int {
		if c := a.addr.Compare(b.addr); c != 0 {
			return c
		}
		return compareIdentities(a.id, b.id)
	})
	out := make([]discoveryv1.Endpoint, len(items))
	for i, it := range items {
		out[i] = *it.ep
	}
	return out
}

func compareIdentities(a, b Identity) int {
	return cmp.Or(
		cmp.Compare(a.Addresses, b.Addresses),
		cmp.Compare(a.Namespace, b.Namespace),
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(a.Hostname, b.Hostname),
	)
}
