// Package records decides, without any client or server, what the clusterset zone of the
// multi-cluster services DNS specification answers: Build turns a ServiceImport and its imported
// EndpointSlices into the Service a name resolves to, and Respond turns a query and a Lookup of
// those Services into the reply. The CoreDNS plugin feeds both from informers.
package records

import (
	"net/netip"
	"slices"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Port is one port of an import or of an imported slice, with name and protocol lower-cased as
// they appear in SRV names (_<name>._<protocol>). Name is empty for an unnamed port, which has
// no _<name>._<protocol> record but is still a target of the SRV records at the Service's name.
type Port struct {
	Name     string
	Protocol string
	Port     uint16
}

// Endpoint is one ready endpoint of a headless import, from the cluster that serves it.
type Endpoint struct {
	Cluster string
	// Hostname is the endpoint's hostname as the specification defines it: the EndpointSlice's
	// hostname field when it is a DNS label, else an identifier Build derives from the
	// endpoint's address (see AddressLabel). It is the first label of the endpoint's own name,
	// <hostname>.<cluster>.<service>.<namespace>.svc.<zone>.
	Hostname string
	Addrs    []netip.Addr
	// Ports are the ports of the imported slice the endpoint came from: a headless SRV record
	// carries the port the endpoint listens on in its own cluster.
	Ports []Port
}

// Service is what the names of one imported Service resolve to.
type Service struct {
	Headless bool
	// IPs are the ServiceImport's clusterset IPs; empty for a headless import.
	IPs   []netip.Addr
	Ports []Port
	// Endpoints are the ready endpoints of every cluster's imported slices, ordered by cluster,
	// hostname and address; only a headless import has them.
	Endpoints []Endpoint
}

// Exists reports whether the Service's name exists in the zone. A headless import without a
// ready endpoint does not: the specification (2.4.1) answers NXDOMAIN for it, and so for every
// name below it.
func (s *Service) Exists() bool {
	return !s.Headless || len(s.Endpoints) > 0
}

// Build returns the Service that the ServiceImport imp resolves to, with the endpoints of the
// imported slices given. Slices of another Service or without a usable source cluster,
// endpoints that are not ready and addresses that do not parse are left out rather than
// refused: one bad object must not take the other names down.
func Build(imp *mcsv1beta1.ServiceImport, importedSlices []*discoveryv1.EndpointSlice) Service {
	svc := Service{Headless: imp.Spec.Type == mcsv1beta1.Headless}
	for _, p := range imp.Spec.Ports {
		if port, ok := makePort(p.Name, string(p.Protocol), p.Port); ok {
			svc.Ports = append(svc.Ports, port)
		}
	}
	if !svc.Headless {
		for _, ip := range imp.Spec.IPs {
			if addr, ok := parseAddr(ip); ok && !slices.Contains(svc.IPs, addr) {
				svc.IPs = append(svc.IPs, addr)
			}
		}
		return svc
	}
	for _, s := range importedSlices {
		if s == nil || s.Labels[mcsv1beta1.LabelServiceName] != imp.Name || s.Namespace != imp.Namespace {
			continue
		}
		cluster, ok := clusterName(s.Labels[mcsv1beta1.LabelSourceCluster])
		if !ok {
			continue
		}
		ports := slicePorts(s.Ports)
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			ep := Endpoint{Cluster: cluster, Ports: ports}
			if e.Hostname != nil && isLabel(strings.ToLower(*e.Hostname)) {
				ep.Hostname = strings.ToLower(*e.Hostname)
			}
			for _, a := range e.Addresses {
				if addr, ok := parseAddr(a); ok && !slices.Contains(ep.Addrs, addr) {
					ep.Addrs = append(ep.Addrs, addr)
				}
			}
			if len(ep.Addrs) > 0 {
				svc.Endpoints = append(svc.Endpoints, ep)
			}
		}
	}
	nameEndpoints(svc.Endpoints)
	slices.SortStableFunc(svc.Endpoints, func(a, b Endpoint) int {
		if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		if c := strings.Compare(a.Hostname, b.Hostname); c != 0 {
			return c
		}
		// The whole address list last, so even two copies of one endpoint come out in the same
		// order whatever order the informer delivered the slices in.
		return slices.CompareFunc(a.Addrs, b.Addrs, netip.Addr.Compare)
	})
	return svc
}

// slicePorts returns a slice's ports as SRV records carry them, unnamed ones included.
func slicePorts(in []discoveryv1.EndpointPort) []Port {
	var ports []Port
	for _, p := range in {
		if p.Port == nil {
			continue
		}
		name, proto := "", "TCP"
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		if port, ok := makePort(name, proto, *p.Port); ok && !slices.Contains(ports, port) {
			ports = append(ports, port)
		}
	}
	return ports
}

// parseAddr reads an address as the records carry it: IPv4-mapped IPv6 as IPv4 and without an
// IPv6 zone, which no DNS record can hold.
func parseAddr(s string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return addr.Unmap().WithZone(""), true
}

// clusterName returns the source-cluster label as it appears in names: lower-case, and only when
// every dot-separated part is a DNS label, since a part that is not could not be asked for.
func clusterName(label string) (string, bool) {
	cluster := strings.ToLower(strings.Trim(label, "."))
	if cluster == "" {
		return "", false
	}
	for part := range strings.SplitSeq(cluster, ".") {
		if len(part) == 0 || len(part) > validation.DNS1123LabelMaxLength || strings.ContainsAny(part, " \\") {
			return "", false
		}
	}
	return cluster, true
}

// isLabel reports whether a hostname is a DNS-1123 label, as the API server validates it: a
// hostname that is not one could not be the first label of a name.
func isLabel(s string) bool {
	return len(validation.IsDNS1123Label(s)) == 0
}

// makePort keeps ports that a DNS name can carry: in range and, when named, with a name that is
// one label.
func makePort(name, protocol string, port int32) (Port, bool) {
	if port <= 0 || port > 65535 || strings.ContainsAny(name, ". \\") {
		return Port{}, false
	}
	if protocol == "" {
		protocol = "TCP"
	}
	return Port{Name: strings.ToLower(name), Protocol: strings.ToLower(protocol), Port: uint16(port)}, true
}
