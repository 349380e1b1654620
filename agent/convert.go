package agent

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
)

// ServiceInputs is everything Convert reads for one Service.
type ServiceInputs struct {
	Service *corev1.Service
	// Slices are the EndpointSlices labelled kubernetes.io/service-name with
	// the Service's name, local and imported alike.
	Slices []*discoveryv1.EndpointSlice
	// Import is the ServiceImport that owns a derived Service, nil for any
	// other Service. Its spec.ips become extra cluster IPs.
	Import *mcsv1beta1.ServiceImport
}

// Converted is the dataplane's view of one Service on one node.
type Converted struct {
	Service dataplane.Service
	// Skip says why the Service is not programmed at all; empty when it is.
	Skip string
	// Problems lists parts of the input that were left out (an unparsable
	// address, an unsupported protocol), so the agent can say why.
	Problems []string
	// NoLocalInternal and NoLocalExternal report an internal or external
	// traffic policy of Local for which this node has no endpoint although
	// the Service has some elsewhere: that traffic fails on this node.
	NoLocalInternal, NoLocalExternal bool
}

// Convert turns a Service, its EndpointSlices and its ServiceImport into the
// dataplane input for node, choosing each port's endpoints with
// selection.Select. It is pure and never fails: what cannot be used is
// reported in Skip or Problems.
func Convert(in ServiceInputs, node selection.Node) Converted {
	var out Converted
	svc := in.Service
	if svc == nil {
		out.Skip = "no Service"
		return out
	}
	out.Service = dataplane.Service{Namespace: svc.Namespace, Name: svc.Name}
	switch {
	case svc.Spec.Type == corev1.ServiceTypeExternalName:
		out.Skip = "ExternalName Service"
		return out
	case svc.Spec.ClusterIP == corev1.ClusterIPNone:
		out.Skip = "headless Service"
		return out
	}
	out.Service.ClusterIPs = clusterIPs(svc, in.Import, &out.Problems)
	if len(out.Service.ClusterIPs) == 0 {
		out.Skip = "no cluster IP"
		return out
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		out.Service.AffinityTimeout = affinityTimeout(svc)
	}

	policy := trafficPolicy(svc)
	plan, hasPlan := clusterPlan(svc, node)
	for _, sp := range svc.Spec.Ports {
		proto, ok := protocolOf(sp.Protocol)
		if !ok {
			out.Problems = append(out.Problems, fmt.Sprintf("port %q: unsupported protocol %q", sp.Name, sp.Protocol))
			continue
		}
		if sp.Port < 1 || sp.Port > 65535 || sp.NodePort < 0 || sp.NodePort > 65535 {
			out.Problems = append(out.Problems, fmt.Sprintf("port %q: port %d or node port %d out of range", sp.Name, sp.Port, sp.NodePort))
			continue
		}
		candidates, addrs := endpointsFor(sp.Name, sp.Protocol, in.Slices, &out.Problems)
		res := selectByFamily(policy, candidates, addrs, node)
		port := dataplane.Port{Name: sp.Name, Protocol: proto, Port: uint16(sp.Port), NodePort: uint16(sp.NodePort)}
		// ClusterIP traffic follows internalTrafficPolicy. The dataplane
		// sends NodePort traffic of a non-Local external policy through the
		// same chain, so with internal Local and external Cluster NodePort
		// traffic also stays on this node (see docs/agent.md).
		if policy.InternalTrafficLocal {
			port.Endpoints = toDataplane(res.Local, addrs, node)
			out.NoLocalInternal = out.NoLocalInternal || (len(res.Local) == 0 && res.HasAnyEndpoints)
		} else {
			port.Endpoints = toDataplane(res.Cluster, addrs, node)
			if hasPlan {
				// The cluster allocation replaces hints: they were written for one cluster's
				// zones and cannot weigh clusters (see clusterplan.go).
				if weighted := weightedEndpoints(candidates, plan, addrs, node); weighted != nil {
					port.Endpoints = weighted
				}
			}
		}
		if policy.ExternalTrafficLocal && port.NodePort != 0 {
			port.ExternalLocal = true
			port.ExternalEndpoints = toDataplane(res.Local, addrs, node)
			out.NoLocalExternal = out.NoLocalExternal || (len(res.Local) == 0 && res.HasAnyEndpoints)
		}
		out.Service.Ports = append(out.Service.Ports, port)
	}
	return out
}

// selectByFamily runs selection.Select for each IP family on its own and joins the lists. A
// kube-proxy node runs one proxier per family, each seeing only its family's slices, so the
// fallback to serving and terminating endpoints and the choice of topology hints are made per
// family: IPv6 endpoints being ready must not leave the IPv4 table without its terminating
// ones.
func selectByFamily(policy selection.Service, candidates []selection.Endpoint, addrs []netip.AddrPort, node selection.Node) selection.Result {
	v6 := 0
	for _, a := range addrs {
		if a.Addr().Is6() {
			v6++
		}
	}
	if v6 == 0 || v6 == len(addrs) {
		return selection.Select(policy, candidates, node)
	}
	var byFamily [2][]selection.Endpoint
	for _, c := range candidates {
		i, err := strconv.Atoi(c.Address)
		if err != nil || i < 0 || i >= len(addrs) {
			continue
		}
		f := 0
		if addrs[i].Addr().Is6() {
			f = 1
		}
		byFamily[f] = append(byFamily[f], c)
	}
	var out selection.Result
	for _, eps := range byFamily {
		res := selection.Select(policy, eps, node)
		if res.Cluster != nil {
			out.Cluster = append(append(make([]selection.Endpoint, 0, len(out.Cluster)+len(res.Cluster)), out.Cluster...), res.Cluster...)
		}
		if res.Local != nil {
			out.Local = append(append(make([]selection.Endpoint, 0, len(out.Local)+len(res.Local)), out.Local...), res.Local...)
		}
		out.HasAnyEndpoints = out.HasAnyEndpoints || res.HasAnyEndpoints
		out.HasLocalEndpoints = out.HasLocalEndpoints || res.HasLocalEndpoints
		if res.Topology != selection.ModeNone {
			out.Topology = res.Topology
		}
	}
	return out
}

// clusterIPs returns the Service's cluster IPs followed by any ServiceImport
// IP they do not already include. The MCS controller sets spec.ips to the
// derived Service's own IPs, so usually nothing is added; another
// implementation may allocate ClusterSet IPs of its own, and those must lead
// to the same endpoints.
func clusterIPs(svc *corev1.Service, imp *mcsv1beta1.ServiceImport, problems *[]string) []netip.Addr {
	raw := svc.Spec.ClusterIPs
	if len(raw) == 0 && svc.Spec.ClusterIP != "" {
		raw = []string{svc.Spec.ClusterIP}
	}
	var ips []netip.Addr
	add := func(s, what string) {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			*problems = append(*problems, fmt.Sprintf("%s %q is not an IP address", what, s))
			return
		}
		ip = ip.Unmap()
		for _, have := range ips {
			if have == ip {
				return
			}
		}
		ips = append(ips, ip)
	}
	for _, s := range raw {
		if s != "" && s != corev1.ClusterIPNone {
			add(s, "cluster IP")
		}
	}
	if imp != nil && imp.Spec.Type == mcsv1beta1.ClusterSetIP && len(ips) > 0 {
		for _, s := range imp.Spec.IPs {
			add(s, "ServiceImport IP")
		}
	}
	return ips
}

func affinityTimeout(svc *corev1.Service) time.Duration {
	seconds := int32(corev1.DefaultClientIPServiceAffinitySeconds)
	if cfg := svc.Spec.SessionAffinityConfig; cfg != nil && cfg.ClientIP != nil && cfg.ClientIP.TimeoutSeconds != nil {
		seconds = *cfg.ClientIP.TimeoutSeconds
	}
	if seconds <= 0 {
		seconds = corev1.DefaultClientIPServiceAffinitySeconds
	}
	return time.Duration(seconds) * time.Second
}

func trafficPolicy(svc *corev1.Service) selection.Service {
	p := selection.Service{
		InternalTrafficLocal: svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal,
		ExternalTrafficLocal: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		ExternallyAccessible: len(svc.Spec.ExternalIPs) > 0 || len(svc.Status.LoadBalancer.Ingress) > 0,
	}
	for _, sp := range svc.Spec.Ports {
		p.ExternallyAccessible = p.ExternallyAccessible || sp.NodePort != 0
	}
	return p
}

func protocolOf(p corev1.Protocol) (dataplane.Protocol, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return dataplane.TCP, true
	case corev1.ProtocolUDP:
		return dataplane.UDP, true
	case corev1.ProtocolSCTP:
		return dataplane.SCTP, true
	}
	return "", false
}

// endpointsFor collects, from every IP slice, the endpoints of the slice port
// matching the Service port's name and protocol, with the conditions
// resolved the way kube-proxy resolves unset ones. Each candidate's Address
// is its index in addrs, which holds its address and port: that costs no
// allocation for the first hundred endpoints, unlike formatting "ip:port".
func endpointsFor(name string, protocol corev1.Protocol, slices []*discoveryv1.EndpointSlice, problems *[]string) (candidates []selection.Endpoint, addrs []netip.AddrPort) {
	if protocol == "" {
		protocol = corev1.ProtocolTCP
	}
	var out []selection.Endpoint
	for _, slice := range slices {
		if slice == nil || (slice.AddressType != discoveryv1.AddressTypeIPv4 && slice.AddressType != discoveryv1.AddressTypeIPv6) {
			continue
		}
		number, ok := slicePort(slice, name, protocol)
		if !ok {
			continue
		}
		for i := range slice.Endpoints {
			ep := &slice.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			ip, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil {
				*problems = append(*problems, fmt.Sprintf("slice %s: endpoint address %q is not an IP address", slice.Name, ep.Addresses[0]))
				continue
			}
			// The API server refuses such a slice, but imported slices are written by
			// controllers; an address of the other family would otherwise reach the other
			// family's table, where this slice's fallback decisions were never made.
			if ip = ip.Unmap(); ip.Is6() != (slice.AddressType == discoveryv1.AddressTypeIPv6) {
				*problems = append(*problems, fmt.Sprintf("slice %s: endpoint address %q is not of the slice's type %s", slice.Name, ep.Addresses[0], slice.AddressType))
				continue
			}
			e := selectionEndpoint(strconv.Itoa(len(addrs)), ep)
			e.Cluster = slice.Labels[mcsv1beta1.LabelSourceCluster]
			out = append(out, e)
			addrs = append(addrs, netip.AddrPortFrom(ip.Unmap(), number))
		}
	}
	return out, addrs
}

// slicePort finds the port number a slice uses for the named Service port.
// An unset name or protocol in the slice means "" and TCP.
func slicePort(slice *discoveryv1.EndpointSlice, name string, protocol corev1.Protocol) (uint16, bool) {
	for _, p := range slice.Ports {
		pName, pProto := "", corev1.ProtocolTCP
		if p.Name != nil {
			pName = *p.Name
		}
		if p.Protocol != nil {
			pProto = *p.Protocol
		}
		if pName != name || pProto != protocol {
			continue
		}
		if p.Port == nil || *p.Port < 1 || *p.Port > 65535 {
			return 0, false
		}
		return uint16(*p.Port), true
	}
	return 0, false
}

func selectionEndpoint(address string, ep *discoveryv1.Endpoint) selection.Endpoint {
	c := ep.Conditions
	out := selection.Endpoint{
		Address:     address,
		Ready:       c.Ready == nil || *c.Ready,
		Serving:     c.Serving == nil || *c.Serving,
		Terminating: c.Terminating != nil && *c.Terminating,
	}
	if ep.NodeName != nil {
		out.NodeName = *ep.NodeName
	}
	if ep.Zone != nil {
		out.Zone = *ep.Zone
	}
	if ep.Hints != nil {
		for _, z := range ep.Hints.ForZones {
			out.ZoneHints = append(out.ZoneHints, z.Name)
		}
		for _, n := range ep.Hints.ForNodes {
			out.NodeHints = append(out.NodeHints, n.Name)
		}
	}
	return out
}

func toDataplane(eps []selection.Endpoint, addrs []netip.AddrPort, node selection.Node) []dataplane.Endpoint {
	out := make([]dataplane.Endpoint, 0, len(eps))
	for _, ep := range eps {
		i, err := strconv.Atoi(ep.Address)
		if err != nil || i < 0 || i >= len(addrs) {
			continue
		}
		out = append(out, dataplane.Endpoint{Addr: addrs[i], Local: node.Name != "" && ep.NodeName == node.Name})
	}
	return out
}
