// Package allocation is the published form of a multi-cluster Service's allocation across
// clusters: where each cluster's clients send their traffic when the Service's exports ask for
// PreferSameCluster. The import controller of every member decides it once per Service (package
// controllers/multicluster/locality) and writes it as an annotation on the derived Service; the
// node agents, which watch Services anyway, read it there and only derive their endpoint
// weights from it. The package is plain data with no Kubernetes dependencies, so that both
// sides share one definition of the format without the agent linking the controllers.
//
// The member's Node CPU, the demand the allocation divides by, travels on the member's broker
// Lease (AnnotationWorkerMilliCPU, AnnotationZoneMilliCPU), which the Lease renewer writes
// anyway: publishing it costs no extra write.
package allocation

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

const (
	// Annotation on a derived Service holds the allocation as JSON (see Allocation). It is absent
	// when the Service has no cluster preference, or no allocation is needed (no ready endpoint
	// anywhere, or no member reports CPU): agents then select endpoints as for any Service.
	Annotation = "fleetslice.io/cluster-allocation"
	// AnnotationWorkerMilliCPU on a member's broker Lease is the allocatable milli-CPU of the
	// member's ready worker Nodes, in decimal.
	AnnotationWorkerMilliCPU = "fleetslice.io/worker-milli-cpu"
	// AnnotationZoneMilliCPU on a member's broker Lease splits that CPU by zone as
	// "zone=milli,zone=milli", ascending by zone; absent when a worker Node has no zone label.
	AnnotationZoneMilliCPU = "fleetslice.io/zone-milli-cpu"
)

// Allocation is where every cluster's traffic of one Service goes.
type Allocation struct {
	// Mode is the locality package's mode: Local (everyone keeps everything) or Spill.
	Mode string `json:"mode"`
	// Clusters has one row per cluster that sends or serves traffic, ascending by name.
	Clusters []Cluster `json:"clusters"`
}

// Cluster is one cluster's row: Local plus the Spill shares is 1.
type Cluster struct {
	Cluster string  `json:"cluster"`
	Local   float64 `json:"local"`
	Spill   []Share `json:"spill,omitempty"`
	// Zones splits the kept traffic by client zone; set when the Service prefers its zone.
	Zones []Zone `json:"zones,omitempty"`
	// Intake, set for a cluster other clusters spill to, divides that incoming traffic over its
	// zones; without it incoming traffic spreads evenly over the cluster's endpoints.
	Intake []Share `json:"intake,omitempty"`
}

// Zone is where the kept traffic of one client zone goes: InZone plus OtherZones is the
// cluster's Local share.
type Zone struct {
	Zone       string  `json:"zone"`
	InZone     float64 `json:"inZone"`
	OtherZones []Share `json:"otherZones,omitempty"`
}

// Share is a part of some traffic going To a cluster or zone.
type Share struct {
	To    string  `json:"to"`
	Share float64 `json:"share"`
}

// For returns cluster's row.
func (a Allocation) For(cluster string) (Cluster, bool) {
	for _, c := range a.Clusters {
		if c.Cluster == cluster {
			return c, true
		}
	}
	return Cluster{}, false
}

// String encodes the allocation. encoding/json writes the shortest decimal that parses back to
// the same float64, so a published allocation read back and re-encoded is the same string:
// comparing strings is how the controller tells that nothing changed and skips the write.
func (a Allocation) String() string {
	b, err := json.Marshal(a)
	if err != nil {
		// Only NaN or infinite shares fail, and Validate refuses those before anything is
		// published; an empty string publishes nothing rather than garbage.
		return ""
	}
	return string(b)
}

// Parse decodes and validates an annotation value.
func Parse(s string) (Allocation, error) {
	var a Allocation
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		return Allocation{}, fmt.Errorf("cluster allocation: %w", err)
	}
	return a, a.Validate()
}

// Validate checks what a reader relies on: names present and unique, shares finite and within
// [0, 1], and each row's shares summing to 1 within rounding. A reader that finds it violated
// ignores the whole allocation rather than routing by half of it.
func (a Allocation) Validate() error {
	seen := map[string]bool{}
	for _, c := range a.Clusters {
		if c.Cluster == "" || seen[c.Cluster] {
			return fmt.Errorf("cluster allocation: cluster %q is empty or repeated", c.Cluster)
		}
		seen[c.Cluster] = true
		sum, err := shareSum(c.Local, c.Spill)
		if err != nil {
			return fmt.Errorf("cluster allocation: cluster %q: %w", c.Cluster, err)
		}
		if math.Abs(sum-1) > 1e-6 {
			return fmt.Errorf("cluster allocation: cluster %q: shares sum to %v, not 1", c.Cluster, sum)
		}
		for _, z := range c.Zones {
			zs, err := shareSum(z.InZone, z.OtherZones)
			if err != nil || z.Zone == "" || zs > c.Local+1e-6 {
				return fmt.Errorf("cluster allocation: cluster %q zone %q: shares invalid or above the local share", c.Cluster, z.Zone)
			}
		}
		if _, err := shareSum(0, c.Intake); err != nil {
			return fmt.Errorf("cluster allocation: cluster %q intake: %w", c.Cluster, err)
		}
	}
	return nil
}

func shareSum(first float64, rest []Share) (float64, error) {
	if !validShare(first) {
		return 0, fmt.Errorf("share %v is not within [0, 1]", first)
	}
	sum := first
	for _, s := range rest {
		if s.To == "" || !validShare(s.Share) {
			return 0, fmt.Errorf("share %v to %q is not within [0, 1] or has no destination", s.Share, s.To)
		}
		sum += s.Share
	}
	return sum, nil
}

func validShare(v float64) bool { return !math.IsNaN(v) && v >= 0 && v <= 1+1e-9 }

// FormatZoneCPU writes the per-zone CPU annotation value, ascending by zone.
func FormatZoneCPU(zones map[string]int64) string {
	names := make([]string, 0, len(zones))
	for z := range zones {
		names = append(names, z)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, z := range names {
		parts[i] = z + "=" + strconv.FormatInt(zones[z], 10)
	}
	return strings.Join(parts, ",")
}

// ParseZoneCPU reads the per-zone CPU annotation value.
func ParseZoneCPU(s string) (map[string]int64, error) {
	out := map[string]int64{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		zone, value, ok := strings.Cut(part, "=")
		cpu, err := strconv.ParseInt(value, 10, 64)
		if !ok || zone == "" || err != nil || cpu < 0 {
			return nil, errors.New("zone CPU: want zone=milli-CPU pairs, got " + strconv.Quote(part))
		}
		if _, dup := out[zone]; dup {
			return nil, errors.New("zone CPU: zone " + strconv.Quote(zone) + " repeated")
		}
		out[zone] = cpu
	}
	return out, nil
}
