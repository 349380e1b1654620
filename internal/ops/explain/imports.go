package explain

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
	"github.com/fleetslice/fleetslice/controllers/multicluster/importplan"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
)

// ImportInputs is what a member's import controller reads for one ServiceImport, as far as the
// member (and the broker, when explain may read it) shows it.
type ImportInputs struct {
	// Self is this member's cluster id, "" when it has none.
	Self   string
	Import *mcsv1beta1.ServiceImport
	// Derived is the ClusterSetIP import's derived Service; nil when missing or Headless.
	Derived *corev1.Service
	// Slices are the imported EndpointSlices in the member, each labelled with its source cluster.
	Slices []*discoveryv1.EndpointSlice
	// Export is this member's ServiceExport of the Service; nil when it exports none.
	Export *mcsv1beta1.ServiceExport
	// Records are the broker's ServiceExportRecords of the Service; Broker says whether the
	// broker was read at all (without it the other exporters' preferences are unknown).
	Records []merge.Record
	Broker  bool
	// Members are the clusters whose worker CPU is known: from their broker Leases, or read
	// from their own Nodes.
	Members  []MemberCPU
	Settings Settings
}

// MemberCPU is one cluster's demand and where it was read, with the ClusterProperties its
// broker Lease publishes (nil when not read there).
type MemberCPU struct {
	Cluster    string
	CPU        locality.NodeCPU
	HasCPU     bool
	Source     string
	Properties map[string]string
}

// ImportReport is the explanation of one ServiceImport.
type ImportReport struct {
	Namespace, Name string
	Self            string
	Type            mcsv1beta1.ServiceImportType
	Settings        Settings
	// Preference is the merged fleetslice.io/traffic-distribution and PreferenceSource where it
	// was read; Zones is true when the import also prefers the client's zone.
	Preference, PreferenceSource string
	Zones                        bool
	// Selectors are the import's cluster selectors (KEP-5939, annotation on the ServiceImport),
	// "" for none; with them the allocation follows tiers.
	Selectors string
	// Clusters are the allocation's inputs, one per cluster, ascending.
	Clusters []ClusterInput
	// Decision is locality's result, Have the published annotation and Want the decided one.
	Decision   locality.Result
	Have, Want string
	// Ready is the Ready condition re-derived with importplan, InPlace the one on the import.
	Ready, InPlace string
	Notes          []string
	Differences    []string
}

// ClusterInput is one cluster as the allocation sees it.
type ClusterInput struct {
	Name string
	// MilliCPU is the worker CPU, -1 when unknown; CPUSource where it was read.
	MilliCPU  int64
	CPUSource string
	// Ready counts its ready endpoints among the imported slices, Slices those slices.
	Ready, Slices int
	Exports       bool
}

// ExplainImport runs the import controller's decisions on in.
func ExplainImport(in ImportInputs) ImportReport {
	si := in.Import
	r := ImportReport{Namespace: si.Namespace, Name: si.Name, Self: in.Self, Type: si.Spec.Type, Settings: in.Settings}
	exporters := r.preference(in)
	r.Zones = si.Spec.TrafficDistribution != nil && (*si.Spec.TrafficDistribution == corev1.ServiceTrafficDistributionPreferSameZone ||
		*si.Spec.TrafficDistribution == corev1.ServiceTrafficDistributionPreferClose)

	members := r.members(in, exporters)
	if in.Derived != nil {
		r.Have = in.Derived.Annotations[allocation.Annotation]
	}
	if si.Spec.Type == mcsv1beta1.ClusterSetIP {
		r.Selectors = si.Annotations[v1alpha1.AnnotationClusterSelectors]
	}
	switch {
	case r.Selectors != "" && len(exporters) > 0:
		r.decideTiers(in, members, exporters)
	case r.Preference == v1alpha1.PreferSameCluster && len(exporters) > 0:
		pub := locality.Decide(members, r.Have, r.Zones, locality.ForThreshold(in.Settings.OverloadThreshold))
		r.Decision, r.Want = pub.Result, pub.Annotation
	}
	if r.Want != r.Have {
		r.Differences = append(r.Differences, fmt.Sprintf("the derived Service's %s annotation is %s, the decision is %s",
			allocation.Annotation, quoteOrAbsent(r.Have), quoteOrAbsent(r.Want)))
	}
	r.readiness(in)
	r.derived(in)
	return r
}

// preference finds the merged fleetslice.io/traffic-distribution and the exporting clusters: from
// the broker's records exactly as the controller merges them, else from what the member shows.
func (r *ImportReport) preference(in ImportInputs) []string {
	var live []string
	for _, c := range in.Import.Status.Clusters {
		live = append(live, c.Cluster)
	}
	if in.Broker && len(in.Records) > 0 {
		merged := merge.Merge(in.Records)
		r.Preference, r.PreferenceSource = merged.ClusterTrafficDistribution, fmt.Sprintf("the broker's %d export records, merged (the oldest export, %s, wins)", len(in.Records), merged.OldestCluster)
		// The controller allocates over the exporters that are live, which the import's status lists.
		var out []string
		for _, c := range merged.Clusters {
			if slices.Contains(live, c) {
				out = append(out, c)
			}
		}
		return out
	}
	switch {
	case in.Export != nil:
		r.Preference = in.Export.Annotations[v1alpha1.AnnotationTrafficDistribution]
		r.PreferenceSource = "this member's ServiceExport; another exporter's older export would win (pass --broker-kubeconfig to read them all)"
	case in.Derived != nil && in.Derived.Annotations[allocation.Annotation] != "":
		r.Preference = v1alpha1.PreferSameCluster
		r.PreferenceSource = "inferred from the published allocation; this member exports nothing (pass --broker-kubeconfig to read the exports)"
	default:
		r.PreferenceSource = "no ServiceExport here and no allocation published (pass --broker-kubeconfig to read the exports)"
	}
	return live
}

// members builds the allocation's input: every cluster with known CPU, and every live exporter
// with the ready endpoints of its imported slices.
func (r *ImportReport) members(in ImportInputs, exporters []string) []locality.Member {
	perCluster := map[string][]*discoveryv1.EndpointSlice{}
	for _, s := range in.Slices {
		c := s.Labels[mcsv1beta1.LabelSourceCluster]
		perCluster[c] = append(perCluster[c], s)
	}
	byName := map[string]*locality.Member{}
	inputs := map[string]*ClusterInput{}
	for _, m := range in.Members {
		byName[m.Cluster] = &locality.Member{Name: m.Cluster, CPU: m.CPU, HasCPU: m.HasCPU, Properties: m.Properties}
		inputs[m.Cluster] = &ClusterInput{Name: m.Cluster, MilliCPU: -1, CPUSource: m.Source}
		if m.HasCPU {
			inputs[m.Cluster].MilliCPU = m.CPU.MilliCPU
		}
	}
	for _, c := range exporters {
		if byName[c] == nil {
			byName[c] = &locality.Member{Name: c}
			inputs[c] = &ClusterInput{Name: c, MilliCPU: -1, CPUSource: "unknown: not read (pass --broker-kubeconfig or its --member-context)"}
			r.Notes = append(r.Notes, fmt.Sprintf("cluster %s's CPU is unknown here, so it counts as a cluster without clients", c))
		}
		byName[c].Ready = locality.CountReady(perCluster[c])
		inputs[c].Ready, inputs[c].Slices, inputs[c].Exports = byName[c].Ready.Total, len(perCluster[c]), true
	}
	for c, list := range perCluster {
		if !slices.Contains(exporters, c) {
			r.Differences = append(r.Differences, fmt.Sprintf("%d imported slices from %s, which is not a live exporter; the next sync deletes them", len(list), orNone(c)))
		}
	}
	out := make([]locality.Member, 0, len(byName))
	for _, name := range sortedKeys(byName) {
		out = append(out, *byName[name])
		r.Clusters = append(r.Clusters, *inputs[name])
	}
	return out
}

// readiness re-derives the Ready condition with importplan from what the member shows. Family
// and write problems are only seen by the controller when it writes, so a condition naming
// one is reported, not re-derived.
func (r *ImportReport) readiness(in ImportInputs) {
	si := in.Import
	cond := importplan.ReadyCondition(importplan.Readiness{
		Type: si.Spec.Type, IPs: importplan.ClusterSetIPs(in.Derived), LiveClusters: len(si.Status.Clusters),
	}, si.Generation)
	r.Ready = fmt.Sprintf("%s (%s): %s", cond.Status, cond.Reason, cond.Message)
	have := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
	if have == nil {
		r.InPlace = "none"
		r.Differences = append(r.Differences, "the import has no Ready condition yet")
		return
	}
	r.InPlace = fmt.Sprintf("%s (%s): %s", have.Status, have.Reason, have.Message)
	switch {
	case have.Reason == string(mcsv1beta1.ServiceImportReasonIPFamilyNotSupported),
		have.Reason == string(mcsv1beta1.ServiceImportReasonPending) && have.Message != cond.Message:
		r.Notes = append(r.Notes, "the controller met a problem writing the derived Service: "+have.Message)
	case have.Status != cond.Status || have.Reason != cond.Reason:
		r.Differences = append(r.Differences, fmt.Sprintf("Ready is %s, the inputs give %s", r.InPlace, r.Ready))
	}
}

// derived checks the derived Service against the import's spec with importplan, the function
// the controller updates it with.
func (r *ImportReport) derived(in ImportInputs) {
	si := in.Import
	if si.Spec.Type != mcsv1beta1.ClusterSetIP {
		return
	}
	if in.Derived == nil {
		r.Differences = append(r.Differences, "the ClusterSetIP import has no derived Service; the next sync creates it")
		return
	}
	if importplan.UpdateDerived(in.Derived.DeepCopy(), si.Name, si.Spec) {
		r.Differences = append(r.Differences, fmt.Sprintf("the derived Service %s differs from the import's ports, affinity or traffic policy (or still names the ServiceImport as owner); the next sync updates it", in.Derived.Name))
	}
	if ips := importplan.ClusterSetIPs(in.Derived); !slices.Equal(ips, si.Spec.IPs) {
		r.Differences = append(r.Differences, fmt.Sprintf("spec.ips is %v, the derived Service's cluster IPs are %v", si.Spec.IPs, ips))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func quoteOrAbsent(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}

// decideTiers re-runs the tiered allocation: every member's selector results from the
// ClusterProperties its broker Lease publishes, then locality.DecideTiers with the manager's
// --cluster-selection. Without the broker the other members' properties are unknown, and the
// published allocation is taken as it is.
func (r *ImportReport) decideTiers(in ImportInputs, members []locality.Member, exporters []string) {
	selectors, err := clusterselect.Parse(r.Selectors)
	if err != nil {
		r.Differences = append(r.Differences, "the import's cluster selectors do not parse: "+err.Error())
		return
	}
	if !in.Broker {
		r.Notes = append(r.Notes, "the tiers depend on every member's ClusterProperties, which only their broker Leases show: "+
			"the published allocation is not re-derived (pass --broker-kubeconfig)")
		r.Want = r.Have
		return
	}
	byName := map[string]clusterselect.Member{}
	for _, m := range members {
		byName[m.Name] = clusterselect.Member{Name: m.Name, Properties: m.Properties}
	}
	sources := make([]clusterselect.Member, 0, len(exporters))
	for _, c := range exporters {
		sources = append(sources, byName[c])
	}
	tiers := map[string][][]string{}
	for name, m := range byName {
		for _, res := range clusterselect.Evaluate(selectors, m, sources) {
			tiers[name] = append(tiers[name], res.Clusters)
		}
	}
	for _, m := range clusterselect.Missing(selectors, slices.Collect(maps.Values(byName))) {
		r.Notes = append(r.Notes, fmt.Sprintf("cluster %s lacks ClusterProperty %s, which the selectors compare: it is in no tier", m.Cluster, strings.Join(m.Keys, ", ")))
	}
	pub := locality.DecideTiers(members, tiers, r.Have, r.Zones, in.Settings.ClusterSelection, locality.ForThreshold(in.Settings.OverloadThreshold))
	r.Decision, r.Want = pub.Result, pub.Annotation
}
