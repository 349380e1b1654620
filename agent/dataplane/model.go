// Package dataplane programs the node agent's Service load balancing into the
// kernel with nftables, inside a table of its own ("fleetslice") that it never
// shares with anyone.
//
// Every sync is one nftables transaction, so the kernel never sees a
// half-written table (the lesson of per-rule iptables updates fighting over
// locks at thousands of services). Incremental syncs rewrite only the chains
// and map elements of Services whose content changed and never list the
// table: the Syncer remembers what it wrote. A full sync reads the table back,
// compares it with every Service and writes only what differs, which repairs
// any drift and keeps the clients the affinity maps hold (fulldiff.go); it
// rebuilds the table only when it cannot do that.
//
// A sync plans a transaction as ruleset values (package ruleset) from what the
// Syncer remembers and what it read from the kernel beforehand, and the
// backend translates them: to nft's language through sigs.k8s.io/knftables
// (package nftext), or to netlink messages (package netlinkenc).
//
// The caller converts Kubernetes objects into the plain Service model below,
// choosing the endpoints with package agent/selection.
package dataplane

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// TableName is the nftables table the dataplane owns, in family ip and ip6.
const TableName = "fleetslice"

// Protocol is a Service port's transport protocol, spelled as nft spells it.
type Protocol string

const (
	TCP  Protocol = "tcp"
	UDP  Protocol = "udp"
	SCTP Protocol = "sctp"
)

// Service is what the dataplane needs to know about one Service (or one
// ServiceImport: its IPs go into ClusterIPs the same way).
type Service struct {
	Namespace string
	Name      string
	// ClusterIPs are the virtual IPs that lead to the endpoints: the
	// Service's cluster IPs and any ServiceImport (ClusterSet) IPs. A Syncer
	// uses only the addresses of its own family and ignores the Service
	// entirely when it has none of them.
	ClusterIPs []netip.Addr
	Ports      []Port
	// AffinityTimeout > 0 turns on ClientIP session affinity: a client keeps
	// reaching the same endpoint until it has been idle that long. Whole
	// seconds only, as in Kubernetes.
	AffinityTimeout time.Duration
}

// Key returns "namespace/name".
func (s Service) Key() string { return s.Namespace + "/" + s.Name }

// Port is one Service port with the endpoints selected for it.
type Port struct {
	// Name is the Service port's name; with Protocol it identifies the port
	// and keeps nftables object names stable when the port number changes.
	Name     string
	Protocol Protocol
	Port     uint16
	// NodePort, when not zero, also exposes the port on every local address
	// of the node.
	NodePort uint16
	// Endpoints receive cluster traffic (to ClusterIPs, and NodePort traffic
	// unless ExternalLocal). Empty means the Service has no endpoints, and
	// connections are rejected so clients fail fast instead of timing out.
	Endpoints []Endpoint
	// ExternalLocal is externalTrafficPolicy: Local. NodePort traffic then
	// goes only to ExternalEndpoints (this node's), is not masqueraded so the
	// client address is preserved, and is dropped when there are none.
	ExternalLocal     bool
	ExternalEndpoints []Endpoint
}

// Endpoint is one backend address.
type Endpoint struct {
	Addr netip.AddrPort
	// Local marks an endpoint on this node; a pod that reaches itself
	// through the Service (hairpin) is masqueraded so its replies return
	// through the node's conntrack entry.
	Local bool
	// Weight is the endpoint's share of new connections relative to the port's other
	// endpoints; 0 and 1 both mean one part. nftables' numgen picks uniformly among map
	// elements, so a weight of w is w elements pointing at the endpoint (see dispatch): the
	// caller keeps the sum small (the agent bounds it, see agent/selection.Quantize), and
	// normalize refuses a port whose weights add up to more than MaxDispatchElements.
	Weight uint16
}

// MaxDispatchElements bounds the elements of one port's dispatch map, weights included, so a
// caller's mistake cannot make one Service's map unboundedly large.
const MaxDispatchElements = 1 << 16

// normalize validates svc and returns a copy trimmed to one family, with
// addresses and endpoints sorted so that a mere reordering by the caller does
// not look like a change. ok is false (with no error) when the Service has no
// address in this family.
func normalize(svc Service, fam family) (out Service, ok bool, err error) {
	if svc.Namespace == "" || svc.Name == "" {
		return Service{}, false, fmt.Errorf("service %q: namespace and name are required", svc.Key())
	}
	if svc.AffinityTimeout < 0 || svc.AffinityTimeout%time.Second != 0 {
		return Service{}, false, fmt.Errorf("service %s: affinity timeout %v is not a non-negative number of seconds", svc.Key(), svc.AffinityTimeout)
	}
	out = Service{Namespace: svc.Namespace, Name: svc.Name, AffinityTimeout: svc.AffinityTimeout,
		ClusterIPs: make([]netip.Addr, 0, len(svc.ClusterIPs)), Ports: make([]Port, 0, len(svc.Ports))}
	for _, ip := range svc.ClusterIPs {
		if !ip.IsValid() {
			return Service{}, false, fmt.Errorf("service %s: invalid cluster IP", svc.Key())
		}
		if ip = ip.Unmap(); fam.contains(ip) && !slices.Contains(out.ClusterIPs, ip) {
			out.ClusterIPs = append(out.ClusterIPs, ip)
		}
	}
	if len(out.ClusterIPs) == 0 {
		return Service{}, false, nil
	}
	slices.SortFunc(out.ClusterIPs, netip.Addr.Compare)

	for _, p := range svc.Ports {
		switch p.Protocol {
		case TCP, UDP, SCTP:
		default:
			return Service{}, false, fmt.Errorf("service %s port %q: unsupported protocol %q", svc.Key(), p.Name, p.Protocol)
		}
		if p.Port == 0 {
			return Service{}, false, fmt.Errorf("service %s port %q: port number is zero", svc.Key(), p.Name)
		}
		// The kernel takes one verdict per address and port, so two ports
		// may share neither a name, nor a number, nor a NodePort.
		for _, q := range out.Ports {
			switch {
			case q.Protocol != p.Protocol:
			case q.Name == p.Name:
				return Service{}, false, fmt.Errorf("service %s: duplicate port %q/%s", svc.Key(), p.Name, p.Protocol)
			case q.Port == p.Port:
				return Service{}, false, fmt.Errorf("service %s: ports %q and %q both use %s/%d", svc.Key(), q.Name, p.Name, p.Protocol, p.Port)
			case p.NodePort != 0 && q.NodePort == p.NodePort:
				return Service{}, false, fmt.Errorf("service %s: ports %q and %q both use node port %s/%d", svc.Key(), q.Name, p.Name, p.Protocol, p.NodePort)
			}
		}
		np := Port{Name: p.Name, Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort, ExternalLocal: p.ExternalLocal}
		if np.Endpoints, err = normalizeEndpoints(svc, p, p.Endpoints, fam); err != nil {
			return Service{}, false, err
		}
		if p.ExternalLocal {
			if np.ExternalEndpoints, err = normalizeEndpoints(svc, p, p.ExternalEndpoints, fam); err != nil {
				return Service{}, false, err
			}
		}
		out.Ports = append(out.Ports, np)
	}
	slices.SortFunc(out.Ports, func(a, b Port) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Protocol, b.Protocol))
	})
	return out, true, nil
}

func normalizeEndpoints(svc Service, p Port, eps []Endpoint, fam family) ([]Endpoint, error) {
	out := make([]Endpoint, 0, len(eps))
	for _, ep := range eps {
		addr := netip.AddrPortFrom(ep.Addr.Addr().Unmap(), ep.Addr.Port())
		if !addr.Addr().IsValid() || addr.Port() == 0 {
			return nil, fmt.Errorf("service %s port %q: invalid endpoint %q", svc.Key(), p.Name, ep.Addr)
		}
		if !fam.contains(addr.Addr()) {
			continue
		}
		out = append(out, Endpoint{Addr: addr, Local: ep.Local, Weight: max(ep.Weight, 1)})
	}
	byAddr := func(a, b Endpoint) int { return a.Addr.Compare(b.Addr) }
	if !slices.IsSortedFunc(out, byAddr) {
		slices.SortFunc(out, byAddr)
	}
	// Two slices may list the same address; balancing over a duplicate
	// would double its share.
	out = slices.CompactFunc(out, func(a, b Endpoint) bool { return a.Addr == b.Addr })
	if total := totalWeight(out); total > MaxDispatchElements {
		return nil, fmt.Errorf("service %s port %q: endpoint weights add up to %d, above %d", svc.Key(), p.Name, total, MaxDispatchElements)
	}
	return out, nil
}

// totalWeight is the number of dispatch map elements eps need.
func totalWeight(eps []Endpoint) int {
	n := 0
	for _, ep := range eps {
		n += int(max(ep.Weight, 1))
	}
	return n
}
