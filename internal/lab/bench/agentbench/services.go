package agentbench

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// The Service mix, so the table has every kind of object a node really carries, not only
// ClusterIP dispatch: every NodePortEvery-th Service also has a NodePort (as long as the NodePort
// range lasts), every LocalEvery-th of them externalTrafficPolicy: Local with LocalEndpoints
// endpoints on this node, and every AffinityEvery-th Service ClientIP session affinity.
const (
	NodePortEvery  = 10
	LocalEvery     = 40
	LocalEndpoints = 2
	AffinityEvery  = 50
	// AffinityTimeout is Kubernetes' default sessionAffinityConfig timeout.
	AffinityTimeout = 3 * time.Hour

	nodePortBase  = 30000
	nodePortCount = 2768 // 30000-32767, Kubernetes' default range
	servicePort   = 80
	endpointPort  = 8080
	// MaxServices keeps cluster IPs inside 10.96.0.0/12.
	MaxServices = 1 << 20
	// MaxEndpointAddresses keeps all endpoints inside 10.128.0.0/9.
	MaxEndpointAddresses = 1 << 23
	// MaxEndpoints bounds endpoints per Service to what a sane Service has.
	MaxEndpoints = 1000
)

// podCIDR holds every endpoint address the generator uses, so cluster traffic from pods keeps
// its source while the node's own is masqueraded, as on a real node.
var podCIDR = netip.MustParsePrefix("10.0.0.0/8")

// dataplaneOptions are the Options every Syncer of the part uses.
func dataplaneOptions() dataplane.Options {
	return dataplane.Options{PodCIDRs: []netip.Prefix{podCIDR}}
}

// buildServices returns n Services of perService endpoints each: cluster IPs in 10.96.0.0/12,
// endpoints in 10.128.0.0/9, one TCP port 80 to 8080, and the mix described above.
func buildServices(n, perService int) []dataplane.Service {
	out := make([]dataplane.Service, n)
	for i := range out {
		svc := dataplane.Service{
			Namespace:  fmt.Sprintf("ns-%d", i%50),
			Name:       fmt.Sprintf("svc-%d", i),
			ClusterIPs: []netip.Addr{addrIn(10, 96, i)},
		}
		port := dataplane.Port{Name: "http", Protocol: dataplane.TCP, Port: servicePort}
		port.Endpoints = make([]dataplane.Endpoint, perService)
		for j := range port.Endpoints {
			port.Endpoints[j] = dataplane.Endpoint{Addr: netip.AddrPortFrom(addrIn(10, 128, i*perService+j), endpointPort)}
		}
		if i%NodePortEvery == 0 && i/NodePortEvery < nodePortCount {
			port.NodePort = uint16(nodePortBase + i/NodePortEvery)
			if i%LocalEvery == 0 {
				port.ExternalLocal = true
				for j := range min(LocalEndpoints, perService) {
					port.Endpoints[j].Local = true
				}
				port.ExternalEndpoints = localEndpoints(port.Endpoints)
			}
		}
		if i%AffinityEvery == AffinityEvery/2 {
			svc.AffinityTimeout = AffinityTimeout
		}
		svc.Ports = []dataplane.Port{port}
		out[i] = svc
	}
	return out
}

// addrIn returns the i-th IPv4 address counting from a.b.0.0.
func addrIn(a, b byte, i int) netip.Addr {
	return netip.AddrFrom4([4]byte{a, b + byte(i>>16), byte(i >> 8), byte(i)})
}

func localEndpoints(eps []dataplane.Endpoint) []dataplane.Endpoint {
	var out []dataplane.Endpoint
	for _, ep := range eps {
		if ep.Local {
			out = append(out, ep)
		}
	}
	return out
}

// churn hands out the addresses and names that changes introduce, never reusing one, so every
// change is a real change.
type churn struct {
	endpoints int // fresh endpoint addresses handed out, from 10.16.0.0/12
	added     int // Services added, cluster IPs from 10.112.0.0/12
}

// replaceEndpoint swaps the which-th endpoint of svc's port for a fresh address, as when a pod
// is replaced, and returns the changed Service. It copies what it changes: the Syncer has seen
// the old slices.
func (c *churn) replaceEndpoint(svc dataplane.Service, which int) dataplane.Service {
	c.endpoints++
	port := svc.Ports[0]
	port.Endpoints = append([]dataplane.Endpoint(nil), port.Endpoints...)
	j := which % len(port.Endpoints)
	port.Endpoints[j].Addr = netip.AddrPortFrom(addrIn(10, 16, c.endpoints), endpointPort)
	if port.ExternalLocal {
		port.ExternalEndpoints = localEndpoints(port.Endpoints)
	}
	svc.Ports = []dataplane.Port{port}
	return svc
}

// newService returns a Service that was not there before, shaped like the common case: a
// ClusterIP Service of perService endpoints.
func (c *churn) newService(perService int) dataplane.Service {
	c.added++
	eps := make([]dataplane.Endpoint, perService)
	for j := range eps {
		c.endpoints++
		eps[j] = dataplane.Endpoint{Addr: netip.AddrPortFrom(addrIn(10, 16, c.endpoints), endpointPort)}
	}
	return dataplane.Service{
		Namespace:  "added",
		Name:       fmt.Sprintf("svc-%d", c.added),
		ClusterIPs: []netip.Addr{addrIn(10, 112, c.added)},
		Ports:      []dataplane.Port{{Name: "http", Protocol: dataplane.TCP, Port: servicePort, Endpoints: eps}},
	}
}

// spread returns the k-th of count indexes spread evenly over n, shifted by round so that
// successive rounds touch different Services.
func spread(n, count, k, round int) int {
	step := max(n/max(count, 1), 1)
	return (k*step + round*7919) % n
}
