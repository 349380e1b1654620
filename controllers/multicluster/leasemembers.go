package multicluster

import (
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
)

// leaseMembers remembers what each member Lease says (its cluster, CPU and ClusterProperties)
// by the Lease's resourceVersion. Every import sync reads the live members, and parsing every
// Lease's annotations again in each sync was a third of that reading in a bulk start, while a
// Lease changes once per renewal.
type leaseMembers struct {
	mu     sync.Mutex
	byName map[string]parsedLease
}

type parsedLease struct {
	resourceVersion string
	member          locality.Member
	ok              bool // a member Lease: FromLease accepted it
}

// live returns the member of every Lease that live accepts, in the Leases' order. The
// returned members share their Properties maps with later calls: callers only read them.
func (c *leaseMembers) live(leases []coordinationv1.Lease, live func(cluster string) bool) []locality.Member {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil {
		c.byName = map[string]parsedLease{}
	}
	var out []locality.Member
	for i := range leases {
		p, seen := c.byName[leases[i].Name]
		if !seen || p.resourceVersion != leases[i].ResourceVersion || p.resourceVersion == "" {
			p = parseLease(&leases[i])
			c.byName[leases[i].Name] = p
		}
		if p.ok && live(p.member.Name) {
			out = append(out, p.member)
		}
	}
	if len(c.byName) > len(leases) {
		c.forgetAllBut(leases)
	}
	return out
}

// forgetAllBut drops the entries of Leases that are gone.
func (c *leaseMembers) forgetAllBut(leases []coordinationv1.Lease) {
	keep := make(map[string]bool, len(leases))
	for i := range leases {
		keep[leases[i].Name] = true
	}
	for name := range c.byName {
		if !keep[name] {
			delete(c.byName, name)
		}
	}
}

func parseLease(lease *coordinationv1.Lease) parsedLease {
	l, ok := liveness.FromLease(lease, 0)
	if !ok {
		return parsedLease{resourceVersion: lease.ResourceVersion}
	}
	m := locality.Member{Name: l.Cluster}
	m.CPU, m.HasCPU = locality.NodeCPUFromAnnotations(lease.Annotations)
	m.Properties, _ = clusterselect.ParseProperties(lease.Annotations[v1alpha1.AnnotationClusterProperties])
	return parsedLease{resourceVersion: lease.ResourceVersion, member: m, ok: true}
}
