package merge

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// portLoss is a port of a newer export that was dropped because it clashes with a port an
// older export already contributed.
type portLoss struct {
	cluster       string
	port          mcsv1beta1.ServicePort
	winner        mcsv1beta1.ServicePort
	winnerCluster string
}

type unitedPorts struct {
	// merged is sorted by name, protocol and port.
	merged []mcsv1beta1.ServicePort
	losses []portLoss
	// differing lists, sorted, the clusters whose port set is not the oldest export's. Every
	// cluster with a loss is among them: the oldest export's ports are all merged, so an
	// export with exactly those ports cannot lose one.
	differing []string
}

// conflict says whether the exports disagree on ports. The API asks for PortConflict
// whenever the ports are not identical in all the constituent Services, even when they
// merge without a clash: a port then reaches only the clusters that export it.
func (u unitedPorts) conflict() bool { return len(u.differing) > 0 }

type protocolPort struct {
	protocol string
	port     int32
}

func keyOf(p mcsv1beta1.ServicePort) protocolPort {
	return protocolPort{protocol: string(effectiveProtocol(p.Protocol)), port: p.Port}
}

// unitePorts walks the exports oldest first, so that whenever two ports clash the one
// already taken is the older export's.
func unitePorts(ordered []*Record) unitedPorts {
	type taken struct {
		port    mcsv1beta1.ServicePort
		cluster string
	}
	var all []taken
	byName := map[string]int{}
	byKey := map[protocolPort]int{}
	var losses []portLoss
	unnamed := -1 // index in all of the unnamed port, if one was taken

	for _, record := range ordered {
		for _, port := range distinctPorts(record.Ports) {
			if i, ok := byName[port.Name]; ok {
				if !samePort(all[i].port, port) {
					losses = append(losses, portLoss{cluster: record.ClusterID, port: port, winner: all[i].port, winnerCluster: all[i].cluster})
				}
				continue
			}
			if i, ok := byKey[keyOf(port)]; ok {
				losses = append(losses, portLoss{cluster: record.ClusterID, port: port, winner: all[i].port, winnerCluster: all[i].cluster})
				continue
			}
			// A Service of several ports must name every one, so an unnamed port and any other
			// clash: the derived Service could not carry both, and its write would fail.
			if len(all) > 0 && (port.Name == "" || unnamed >= 0) {
				winner := all[max(unnamed, 0)]
				losses = append(losses, portLoss{cluster: record.ClusterID, port: port, winner: winner.port, winnerCluster: winner.cluster})
				continue
			}
			if port.Name == "" {
				unnamed = len(all)
			}
			byName[port.Name] = len(all)
			byKey[keyOf(port)] = len(all)
			all = append(all, taken{port: port, cluster: record.ClusterID})
		}
	}

	var differing []string
	if len(ordered) > 0 {
		oldestSet := portSet(ordered[0].Ports)
		for _, record := range ordered[1:] {
			if !slices.Equal(portSet(record.Ports), oldestSet) {
				differing = append(differing, record.ClusterID)
			}
		}
		slices.Sort(differing)
	}

	var merged []mcsv1beta1.ServicePort
	for _, t := range all {
		port := t.port
		port.AppProtocol = clonePointer(port.AppProtocol)
		merged = append(merged, port)
	}
	slices.SortFunc(merged, comparePorts)
	return unitedPorts{merged: merged, losses: losses, differing: differing}
}

// portSet is an export's distinct ports in a canonical form (protocol defaulted, sorted),
// so that two exports of the same ports compare equal whatever order or spelling they use.
func portSet(ports []mcsv1beta1.ServicePort) []string {
	set := make([]string, 0, len(ports))
	for _, p := range distinctPorts(ports) {
		set = append(set, describePort(p))
	}
	slices.Sort(set)
	return set
}

// distinctPorts drops the later of two ports of one export that share a name or a
// protocol and number, and an unnamed port beside others. A valid Service never has such
// ports; without this a single broken record would conflict with itself, or give a union no
// Service could carry.
func distinctPorts(ports []mcsv1beta1.ServicePort) []mcsv1beta1.ServicePort {
	if len(ports) < 2 {
		return ports
	}
	names := make(map[string]bool, len(ports))
	keys := make(map[protocolPort]bool, len(ports))
	distinct := make([]mcsv1beta1.ServicePort, 0, len(ports))
	for _, port := range ports {
		if names[port.Name] || keys[keyOf(port)] {
			continue
		}
		names[port.Name] = true
		keys[keyOf(port)] = true
		distinct = append(distinct, port)
	}
	if len(distinct) > 1 && names[""] {
		distinct = slices.DeleteFunc(distinct, func(p mcsv1beta1.ServicePort) bool { return p.Name == "" })
	}
	return distinct
}

// samePort compares everything the ServiceImport exposes of a port. A different appProtocol
// counts as a conflict too: consumers would otherwise speak the wrong protocol to some backends.
func samePort(a, b mcsv1beta1.ServicePort) bool {
	return a.Name == b.Name &&
		keyOf(a) == keyOf(b) &&
		stringOrEmpty(a.AppProtocol) == stringOrEmpty(b.AppProtocol)
}

func comparePorts(a, b mcsv1beta1.ServicePort) int {
	return cmp.Or(
		cmp.Compare(a.Name, b.Name),
		cmp.Compare(effectiveProtocol(a.Protocol), effectiveProtocol(b.Protocol)),
		cmp.Compare(a.Port, b.Port),
		cmp.Compare(stringOrEmpty(a.AppProtocol), stringOrEmpty(b.AppProtocol)),
	)
}

// describePort renders a port for condition messages, e.g. `"http" TCP/80 (appProtocol h2c)`.
func describePort(p mcsv1beta1.ServicePort) string {
	s := strconv.Quote(p.Name) + " " + string(effectiveProtocol(p.Protocol)) + "/" + strconv.Itoa(int(p.Port))
	if app := stringOrEmpty(p.AppProtocol); app != "" {
		s += fmt.Sprintf(" (appProtocol %s)", app)
	}
	return s
}
