package locality

import (
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	wire "github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// NodeCPU is a member's demand as its Lease publishes it.
type NodeCPU struct {
	// MilliCPU is the allocatable milli-CPU of the ready worker Nodes.
	MilliCPU int64
	// Zones splits it by zone; nil when some counted Node has no zone label, since a partial
	// split would skew every zone's share (the zone allocator refuses it for the same reason).
	Zones map[string]int64
}

// CPUFromNodes sums a member's demand by the zone hints' rule (topology.NodeSendsTraffic).
func CPUFromNodes(nodes []*corev1.Node) NodeCPU {
	out := NodeCPU{Zones: map[string]int64{}}
	for _, n := range nodes {
		if !topology.NodeSendsTraffic(n) {
			continue
		}
		cpu, ok := n.Status.Allocatable[corev1.ResourceCPU]
		if !ok || cpu.MilliValue() <= 0 {
			continue
		}
		out.MilliCPU += cpu.MilliValue()
		zone := n.Labels[corev1.LabelTopologyZone]
		if zone == "" || out.Zones == nil {
			out.Zones = nil
			continue
		}
		out.Zones[zone] += cpu.MilliValue()
	}
	return out
}

// Annotations are the Lease annotations that publish c; the renewer sets them on the renewal it
// writes anyway.
func (c NodeCPU) Annotations() map[string]string {
	out := map[string]string{wire.AnnotationWorkerMilliCPU: strconv.FormatInt(c.MilliCPU, 10)}
	if len(c.Zones) > 0 {
		out[wire.AnnotationZoneMilliCPU] = wire.FormatZoneCPU(c.Zones)
	}
	return out
}

// NodeCPUFromAnnotations reads a peer's Lease annotations; ok is false when it publishes no
// CPU (a member of an older version), which then counts as a cluster without demand.
func NodeCPUFromAnnotations(annotations map[string]string) (NodeCPU, bool) {
	cpu, err := strconv.ParseInt(annotations[wire.AnnotationWorkerMilliCPU], 10, 64)
	if err != nil || cpu < 0 {
		return NodeCPU{}, false
	}
	out := NodeCPU{MilliCPU: cpu}
	if zones, err := wire.ParseZoneCPU(annotations[wire.AnnotationZoneMilliCPU]); err == nil && len(zones) > 0 {
		var sum int64
		for _, v := range zones {
			sum += v
		}
		if sum == cpu {
			out.Zones = zones
		}
	}
	return out, true
}

// ReadyEndpoints counts the ready endpoints of one cluster's slices, in total and by zone.
type ReadyEndpoints struct {
	Total  int
	ByZone map[string]int
	// Unzoned counts ready endpoints without a zone: with any, the cluster's zones cannot be
	// split.
	Unzoned int
}

// CountReady counts the ready endpoints of slices, each address once: two slices of one
// cluster listing the same address (an address-type migration) are one endpoint.
func CountReady(slices []*discoveryv1.EndpointSlice) ReadyEndpoints {
	out := ReadyEndpoints{ByZone: map[string]int{}}
	seen := map[string]bool{}
	for _, s := range slices {
		if s == nil {
			continue
		}
		for i := range s.Endpoints {
			ep := &s.Endpoints[i]
			if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) || seen[ep.Addresses[0]] {
				continue
			}
			seen[ep.Addresses[0]] = true
			out.Total++
			if ep.Zone == nil || *ep.Zone == "" {
				out.Unzoned++
				continue
			}
			out.ByZone[*ep.Zone]++
		}
	}
	return out
}

// Member is one cluster as the import controller sees it for one Service.
type Member struct {
	Name string
	// CPU is its published demand; HasCPU false when it publishes none.
	CPU    NodeCPU
	HasCPU bool
	Ready  ReadyEndpoints
	// Properties are the ClusterProperties its Lease publishes (nil when it publishes none),
	// which cluster selectors match.
	Properties map[string]string
}

// Publication is what the import controller writes on the derived Service.
type Publication struct {
	// Annotation is the allocation's encoding; empty means remove the annotation.
	Annotation string
	Result     Result
}

// Decide computes the allocation of one Service from its members and the annotation published
// last time (previous, "" for none), and returns what to publish. zones splits each cluster by
// zone (the ServiceImport asks for PreferSameZone). Only Local and Spill allocations are
// published: without ready endpoints there is nothing to route, and without CPU anywhere the
// allocation spreads, which is what agents do anyway without one.
func Decide(members []Member, previous string, zones bool, opts Options) Publication {
	return publish(Allocate(clustersOf(members, zones, nil), previousOf(previous), opts))
}

// DecideTiers is Decide for a Service with cluster selectors: tiers holds each member's ordered
// selector results as an importing cluster (package clusterselect), and selection says how they
// are followed: AllocateTiers (Bounded) or the KEP's default, FirstReady.
func DecideTiers(members []Member, tiers map[string][][]string, previous string, zones bool, selection Selection, opts Options) Publication {
	if selection == SelectionFirstReady {
		return publish(FirstReady(clustersOf(members, false, tiers), previousOf(previous), opts))
	}
	return publish(AllocateTiers(clustersOf(members, zones, tiers), previousOf(previous), opts))
}

func clustersOf(members []Member, zones bool, tiers map[string][][]string) []Cluster {
	clusters := make([]Cluster, 0, len(members))
	for _, m := range members {
		c := Cluster{Name: m.Name, Endpoints: m.Ready.Total}
		if m.HasCPU {
			c.MilliCPU = m.CPU.MilliCPU
		}
		if zones && m.HasCPU && m.CPU.Zones != nil && m.Ready.Unzoned == 0 {
			c = Cluster{Name: m.Name, Zones: zoneInputs(m.CPU.Zones, m.Ready.ByZone)}
		}
		c.Tiers = tiers[m.Name]
		clusters = append(clusters, c)
	}
	return clusters
}

func previousOf(annotation string) []ClusterAllocation {
	if annotation == "" {
		return nil
	}
	a, err := wire.Parse(annotation)
	if err != nil {
		return nil
	}
	return FromWire(a)
}

func publish(res Result) Publication {
	if res.Mode != Local && res.Mode != Spill {
		return Publication{Result: res}
	}
	return Publication{Annotation: ToWire(res).String(), Result: res}
}

func zoneInputs(cpu map[string]int64, ready map[string]int) []Zone {
	byName := map[string]Zone{}
	for z, v := range cpu {
		byName[z] = Zone{Name: z, MilliCPU: v}
	}
	for z, n := range ready {
		zone := byName[z]
		zone.Name, zone.Endpoints = z, n
		byName[z] = zone
	}
	out := make([]Zone, 0, len(byName))
	for _, z := range byName {
		out = append(out, z) // Allocate sorts them
	}
	return out
}

// ToWire turns a result into its published form. Intake is published only for clusters that
// receive spill: elsewhere no traffic follows it, and it moves with every endpoint count, which
// would rewrite the annotation for nothing.
func ToWire(r Result) wire.Allocation {
	receives := map[string]bool{}
	for _, c := range r.Clusters {
		for _, s := range c.Spill {
			receives[s.To] = true
		}
	}
	out := wire.Allocation{Mode: string(r.Mode), Clusters: make([]wire.Cluster, len(r.Clusters))}
	for i, c := range r.Clusters {
		w := wire.Cluster{Cluster: c.Cluster, Local: c.Local, Spill: wireShares(c.Spill)}
		for _, z := range c.Zones {
			w.Zones = append(w.Zones, wire.Zone{Zone: z.Zone, InZone: z.InZone, OtherZones: wireShares(z.OtherZones)})
		}
		if receives[c.Cluster] {
			w.Intake = wireShares(c.Intake)
		}
		out.Clusters[i] = w
	}
	return out
}

// FromWire reads a published allocation back as Allocate's previous input. Only the
// cross-cluster shares matter there: zone splits carry no hysteresis.
func FromWire(a wire.Allocation) []ClusterAllocation {
	out := make([]ClusterAllocation, len(a.Clusters))
	for i, c := range a.Clusters {
		out[i] = ClusterAllocation{Cluster: c.Cluster, Local: c.Local}
		for _, s := range c.Spill {
			out[i].Spill = append(out[i].Spill, Share{To: s.To, Share: s.Share})
		}
	}
	return out
}

func wireShares(in []Share) []wire.Share {
	if len(in) == 0 {
		return nil
	}
	out := make([]wire.Share, len(in))
	for i, s := range in {
		out[i] = wire.Share{To: s.To, Share: s.Share}
	}
	return out
}
