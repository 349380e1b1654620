// Package statusview shows what fleetslice decided in each cluster of a ClusterSet: per zone the
// Nodes, CPU and running Pods; per Service its endpoints, slices, zones and hints; per
// ServiceImport its clusters, IPs and conditions. `fleetslice status` prints it once and
// `make run` refreshes it until interrupted.
package statusview

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Cluster is one cluster's view.
type Cluster struct {
	Name     string
	Zones    []Zone
	Services []Service
	Imports  []Import
	// Agents are the node agents run for this cluster, if any.
	Agents []Agent
	// Err is set when the cluster could not be read; the rest is then empty.
	Err error
}

// Zone summarises the Nodes and Pods of one zone.
type Zone struct {
	Name              string
	Nodes, ReadyNodes int
	MilliCPU          int64
	RunningPods       int
}

// Service summarises the EndpointSlices of one Service.
type Service struct {
	Namespace, Name string
	Endpoints       int
	Ready           int
	Slices          int
	// ManagedBy counts slices per managing controller.
	ManagedBy map[string]int
	// PerZone counts endpoints per zone; PerHint counts endpoints per hinted zone.
	PerZone, PerHint map[string]int
	// Unhinted counts ready endpoints without a zone hint.
	Unhinted int
}

// Import summarises one ServiceImport.
type Import struct {
	Namespace, Name string
	Type            string
	IPs             []string
	Clusters        []string
	Ready           string
	// Resolves is what the cluster's DNS answers for DNSName (ResolveImports); empty when
	// nobody asked.
	Resolves string
	// Traffic says where each cluster's clients send the Service's traffic, from the cluster
	// allocation on the derived Service (see traffic.go); empty without one.
	Traffic string
	// TCPPort is the import's first TCP port, 0 without one: where requests are sent to see
	// where the traffic goes (Observed).
	TCPPort int32
	// Observed says which clusters and zones answered requests sent from a Pod of this cluster
	// (SummariseAnswers); empty when nobody sent any.
	Observed string
}

// Collect reads one cluster. Errors are kept in the view rather than returned so that one broken
// cluster does not hide the others.
func Collect(ctx context.Context, name string, c client.Reader) Cluster {
	view := Cluster{Name: name}
	if err := collect(ctx, c, &view); err != nil {
		return Cluster{Name: name, Err: err}
	}
	return view
}

func collect(ctx context.Context, c client.Reader, view *Cluster) error {
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	zones := map[string]*Zone{}
	nodeZone := map[string]string{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		zoneName := n.Labels[corev1.LabelTopologyZone]
		if zoneName == "" {
			zoneName = "(none)"
		}
		nodeZone[n.Name] = zoneName
		z := zones[zoneName]
		if z == nil {
			z = &Zone{Name: zoneName}
			zones[zoneName] = z
		}
		z.Nodes++
		if nodeReady(n) {
			z.ReadyNodes++
			z.MilliCPU += n.Status.Allocatable.Cpu().MilliValue()
		}
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods); err != nil {
		return fmt.Errorf("listing pods: %w", err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.Namespace == "kube-system" {
			continue
		}
		if z := zones[nodeZone[p.Spec.NodeName]]; z != nil {
			z.RunningPods++
		}
	}
	for _, z := range zones {
		view.Zones = append(view.Zones, *z)
	}
	sort.Slice(view.Zones, func(i, j int) bool { return view.Zones[i].Name < view.Zones[j].Name })

	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, slices); err != nil {
		return fmt.Errorf("listing endpointslices: %w", err)
	}
	view.Services = summariseSlices(slices.Items)

	imports := &mcsv1beta1.ServiceImportList{}
	if err := c.List(ctx, imports); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("listing serviceimports: %w", err)
	}
	for i := range imports.Items {
		imp := summariseImport(&imports.Items[i])
		imp.Traffic = trafficOf(ctx, c, &imports.Items[i])
		view.Imports = append(view.Imports, imp)
	}
	return nil
}

func summariseSlices(items []discoveryv1.EndpointSlice) []Service {
	byService := map[string]*Service{}
	var order []string
	for i := range items {
		s := &items[i]
		if s.Namespace == "default" && s.Labels[discoveryv1.LabelServiceName] == "kubernetes" {
			continue
		}
		key := s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]
		svc := byService[key]
		if svc == nil {
			svc = &Service{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName],
				ManagedBy: map[string]int{}, PerZone: map[string]int{}, PerHint: map[string]int{}}
			byService[key] = svc
			order = append(order, key)
		}
		svc.Slices++
		svc.ManagedBy[s.Labels[discoveryv1.LabelManagedBy]]++
		for _, ep := range s.Endpoints {
			svc.Endpoints++
			ready := ep.Conditions.Ready == nil || *ep.Conditions.Ready
			if ready {
				svc.Ready++
			}
			if ep.Zone != nil {
				svc.PerZone[*ep.Zone]++
			}
			if ep.Hints != nil && len(ep.Hints.ForZones) > 0 {
				for _, h := range ep.Hints.ForZones {
					svc.PerHint[h.Name]++
				}
			} else if ready {
				svc.Unhinted++
			}
		}
	}
	sort.Strings(order)
	out := make([]Service, 0, len(order))
	for _, key := range order {
		out = append(out, *byService[key])
	}
	return out
}

func summariseImport(si *mcsv1beta1.ServiceImport) Import {
	imp := Import{Namespace: si.Namespace, Name: si.Name, Type: string(si.Spec.Type), IPs: si.Spec.IPs, Ready: "-"}
	for _, c := range si.Status.Clusters {
		imp.Clusters = append(imp.Clusters, c.Cluster)
	}
	for _, p := range si.Spec.Ports {
		if p.Protocol == corev1.ProtocolTCP || p.Protocol == "" {
			imp.TCPPort = p.Port
			break
		}
	}
	if cond := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)); cond != nil {
		imp.Ready = fmt.Sprintf("%s (%s)", cond.Status, cond.Reason)
	}
	return imp
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// counts renders a map as "a=1 b=2" in key order.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
	}
	return strings.Join(parts, " ")
}
