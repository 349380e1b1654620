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
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Port is one port of an import or of an imported slice, with name and protocol lower-cased as
// they appear in SRV names (_<name>._<protocol>).
type Port struct {
	Name     string
	Protocol string
	Port     uint16
}

// Endpoint is one ready endpoint of a headless import, from the cluster that serves it.
type Endpoint struct {
	Cluster  string
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
	// Endpoints are the ready endpoints of every cluster's imported slices, ordered by cluster
	// and hostname; only a headless import has them.
	Endpoints []Endpoint
}

// Build returns the Service that the ServiceImport imp resolves to, with the endpoints of the
// imported slices given. Slices of another Service or without a source cluster, endpoints that
// are not ready and addresses that do not parse are left out rather than refused: one bad
// object must not take the other names down.
func Build(imp *mcsv1beta1.ServiceImport, importedSlices []*discoveryv1.EndpointSlice) Service {
	svc := Service{Headless: imp.Spec.Type == mcsv1beta1.Headless}
	for _, p := range imp.Spec.Ports {
		if port, ok := makePort(p.Name, string(p.Protocol), p.Port); ok {
			svc.Ports = append(svc.Ports, port)
		}
	}
	if !svc.Headless {
		for _, ip := range imp.Spec.IPs {
			if addr, err := netip.ParseAddr(ip); err == nil && !slices.Contains(svc.IPs, addr.Unmap()) {
				svc.IPs = append(svc.IPs, addr.Unmap())
			}
		}
		return svc
	}
	for _, s := range importedSlices {
		if s == nil || s.Labels[mcsv1beta1.LabelServiceName] != imp.Name || s.Namespace != imp.Namespace {
			continue
		}
		cluster := strings.ToLower(strings.Trim(s.Labels[mcsv1beta1.LabelSourceCluster], "."))
		if cluster == "" {
			continue
		}
		var ports []Port
		for _, p := range s.Ports {
			if p.Port == nil || p.Name == nil {
				continue
			}
			proto := "TCP"
			if p.Protocol != nil {
				proto = string(*p.Protocol)
			}
			if port, ok := makePort(*p.Name, proto, *p.Port); ok {
				ports = append(ports, port)
			}
		}
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			ep := Endpoint{Cluster: cluster, Ports: ports}
			if e.Hostname != nil {
				ep.Hostname = strings.ToLower(*e.Hostname)
			}
			for _, a := range e.Addresses {
				if addr, err := netip.ParseAddr(a); err == nil {
					ep.Addrs = append(ep.Addrs, addr.Unmap())
				}
			}
			if len(ep.Addrs) > 0 {
				svc.Endpoints = append(svc.Endpoints, ep)
			}
		}
	}
	slices.SortStableFunc(svc.Endpoints, func(a, b Endpoint) int {
		if c := strings.Compare(a.Cluster, b.Cluster); c != 0 {
			return c
		}
		return strings.Compare(a.Hostname, b.Hostname)
	})
	return svc
}

// makePort keeps ports that a DNS name can carry: in range and, when named, with a name that is
// one label.
func makePort(name, protocol string, port int32) (Port, bool) {
	if port <= 0 || port > 65535 || strings.ContainsAny(name, ". ") {
		return Port{}, false
	}
	if protocol == "" {
		protocol = "TCP"
	}
	return Port{Name: strings.ToLower(name), Protocol: strings.ToLower(protocol), Port: uint16(port)}, true
}
