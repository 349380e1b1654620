package importplan

import (
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// Input is everything one import sync reads, gathered before anything is decided.
type Input struct {
	Key types.NamespacedName
	// Records are the broker's trustworthy records of the exported Service, live or not.
	Records []merge.Record
	// Live tells which exporting clusters hold their Lease.
	Live map[string]bool
	// NamespaceMissing: namespace sameness, a member without the namespace does not import
	// (and never creates it); NamespaceTerminating: nothing new is written into it.
	NamespaceMissing, NamespaceTerminating bool
	// Import, Derived: the existing ServiceImport and derived Service; nil when absent.
	Import  *mcsv1beta1.ServiceImport
	Derived *corev1.Service
	// Imported are the import's imported slices in this cluster.
	Imported []discoveryv1.EndpointSlice
	// Sources are the source slices of the live exporting clusters: this cluster's own local
	// slices and the peers' broker copies.
	Sources []sliceplan.Source
	// Members are the live members with the CPU their Leases publish (Ready left empty).
	Members  []locality.Member
	Locality locality.Options
	// Publishing are the live members, this one included, still publishing the exports they
	// had at start (liveness.Starts); read only when the ServiceImport does not exist yet.
	Publishing []string
	// ExportedHere: this member has a ServiceExport of the Service; read only when this member
	// is among Publishing.
	ExportedHere bool
	// PublishingUnknown: the members' Leases, which say who is still publishing, have not been
	// read yet (a manager that has just started); read with Publishing.
	PublishingUnknown bool
	// Selection is how cluster selectors' tiers are followed; Self is this member's id, whose
	// selector results the ServiceImport carries.
	Selection locality.Selection
	Self      string
}

// Sync is every write one import sync makes. The writer applies the derived Service first, then
// the ServiceImport, the imported slices and the ServiceImport's status. Two facts only the API
// server knows are bound while writing, never decided there: how the derived Service's create
// or update ended (its cluster IPs, or why it was refused), from which ImportSpec and
// ImportStatus decide the ServiceImport's spec and status, so that a ServiceImport is created
// with its ClusterSetIPs and needs no second spec write; and the UID of a ServiceImport this
// sync creates, which its imported slices name as owner (BindOwner).
type Sync struct {
	// Skip says why nothing is written; empty otherwise.
	Skip string
	// Teardown removes the import of a Service no cluster exports any more; nothing below is
	// set with it.
	Teardown *Teardown
	// CreateImport or UpdateImport (labels and annotations) the ServiceImport. A created one
	// gets its spec from ImportSpec once the derived Service is written.
	CreateImport, UpdateImport *mcsv1beta1.ServiceImport
	Derived                    DerivedPlan
	Slices                     sliceplan.Changes
	// Allocation is the cross-cluster allocation decided for the derived Service, when its
	// exports prefer the same cluster; Allocation.Annotation is what Derived carries.
	Allocation *locality.Publication

	merged    merge.Result
	selection selection
	present   bool
	records   []merge.Record
}

// Teardown removes an import: its imported slices, then the derived Service (only one that
// names the import), then the ServiceImport.
type Teardown struct {
	Slices        sliceplan.Changes
	DeleteDerived *corev1.Service
	DeleteImport  *mcsv1beta1.ServiceImport
}

// DerivedPlan is what happens to the derived Service of a ClusterSetIP import.
type DerivedPlan struct {
	// Delete is the existing Service, when the import turned Headless or its IP families
	// changed; Recreate says a new one follows, and so does a changed ClusterSetIP.
	Delete   *corev1.Service
	Recreate bool
	// Create holds one Service per way of asking for the import's IP families, best first: the
	// writer tries them in order until one is accepted.
	Create []*corev1.Service
	// Update is the existing Service with its managed fields and allocation set; Keep is the
	// existing Service when nothing about it changes.
	Update, Keep *corev1.Service
}

// waitingFor returns the members a new import waits for: those still publishing the exports
// they started with, but this member only while its own part of the Service is open. A peer
// cannot tell which Services a publishing member will export, so it waits for the whole
// publication; this member knows its own: once its record of the Service is in the broker cache
// (or it exports none), the import is created with its final exporters at once, and the
// record's arrival is what enqueues it. A member joining a running set so imports while it
// publishes, not after.
func waitingFor(in Input) []string {
	if !slices.Contains(in.Publishing, in.Self) {
		return in.Publishing
	}
	if in.ExportedHere && !slices.ContainsFunc(in.Records, func(r merge.Record) bool { return r.ClusterID == in.Self }) {
		return in.Publishing
	}
	return slices.DeleteFunc(slices.Clone(in.Publishing), func(c string) bool { return c == in.Self })
}

// Plan decides every write of one import sync from what was read.
func Plan(in Input) Sync {
	if len(in.Records) == 0 {
		return Sync{Teardown: teardown(in)}
	}
	if reason := SkipReason(in); reason != "" {
		return Sync{Skip: reason}
	}
	merged := mergeLive(in.Records, in.Live)
	s := Sync{merged: merged, records: in.Records, selection: planSelection(in, merged)}
	si := s.planImport(in)
	s.planDerived(in, si)
	owner := OwnerOf(si)
	desired := sliceplan.Imported(sliceTarget(si, merged.Spec.Type, &owner), sourcesOf(in.Sources, merged.Clusters))
	s.Slices = sliceplan.Plan(desired, in.Imported)
	s.present = len(desired) > 0
	return s
}

// SkipReason says why a sync of an import that has records writes nothing, "" when it writes.
// It reads only the records, the namespace, the ServiceImport and who is still publishing
// (Records, Namespace*, Import, Publishing*, ExportedHere, Self), so a reader can stop there:
// while members publish their first exports, most syncs of a bulk start end here, one per peer
// record and slice copy that arrives, and reading the slices and Leases for them was most of
// the import controller's CPU.
func SkipReason(in Input) string {
	var waiting []string
	if in.Import == nil {
		waiting = waitingFor(in)
	}
	switch {
	case in.NamespaceMissing:
		return "the namespace does not exist in this cluster"
	case in.NamespaceTerminating:
		return "the namespace is being deleted"
	case in.Import != nil && in.Import.DeletionTimestamp != nil:
		return "the ServiceImport is being deleted; its deletion brings the import back"
	case in.Import == nil && in.PublishingUnknown:
		return "waiting for the members' Leases to be read: they say who is still publishing"
	case len(waiting) > 0:
		// Created now, the import would be written again as each further exporter's record
		// arrives; the membership controller enqueues it again once the wait is over.
		return "waiting for " + strings.Join(waiting, ", ") + " to publish the exports they started with"
	}
	return ""
}

// mergeLive merges the records of the live exporters. With none live, the ServiceImport and
// its ClusterSetIP stay stable (merged from every record) so that clients recover as soon as
// one exporter comes back, but no endpoints are imported.
func mergeLive(records []merge.Record, live map[string]bool) merge.Result {
	var alive []merge.Record
	for _, rec := range records {
		if live[rec.ClusterID] {
			alive = append(alive, rec)
		}
	}
	if len(alive) == 0 {
		merged := merge.Merge(records)
		merged.Clusters = nil
		return merged
	}
	return merge.Merge(alive)
}

// planImport creates the ServiceImport or brings its labels and annotations up to date (only
// the exported ones belong on it), and returns it as the later writes see it.
func (s *Sync) planImport(in Input) *mcsv1beta1.ServiceImport {
	annotations := s.selection.annotations(s.merged.Annotations)
	if in.Import == nil {
		s.CreateImport = &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: in.Key.Namespace, Name: in.Key.Name, Labels: s.merged.Labels, Annotations: annotations},
			Spec:       Spec(s.merged.Spec, ClusterSetIPs(in.Derived)),
		}
		return s.CreateImport
	}
	si := in.Import
	if !equality.Semantic.DeepEqual(si.Labels, s.merged.Labels) || !equality.Semantic.DeepEqual(si.Annotations, annotations) {
		s.UpdateImport = si.DeepCopy()
		s.UpdateImport.Labels, s.UpdateImport.Annotations = s.merged.Labels, annotations
		return s.UpdateImport
	}
	return si
}

// planDerived keeps the derived ClusterIP Service of a ClusterSetIP import, with the
// allocation annotation, and removes it from a Headless one.
func (s *Sync) planDerived(in Input, si *mcsv1beta1.ServiceImport) {
	spec := s.merged.Spec
	existing := in.Derived
	if existing != nil && (spec.Type != mcsv1beta1.ClusterSetIP || NeedsRecreate(existing, spec.IPFamilies)) {
		s.Derived.Delete = existing
		s.Derived.Recreate = spec.Type == mcsv1beta1.ClusterSetIP
		existing = nil
	}
	if spec.Type != mcsv1beta1.ClusterSetIP {
		return
	}
	have := ""
	if existing != nil {
		have = existing.Annotations[allocation.Annotation]
	}
	want := s.planAllocation(in, have)
	if existing == nil {
		for _, attempt := range FamilyAttempts(spec.IPFamilies) {
			svc := DerivedService(si.Namespace, si.Name, spec, attempt)
			setAnnotation(svc, want)
			s.Derived.Create = append(s.Derived.Create, svc)
		}
		return
	}
	update := existing.DeepCopy()
	changed := UpdateDerived(update, si.Name, spec)
	if want != have {
		setAnnotation(update, want)
		changed = true
	}
	if changed {
		s.Derived.Update = update
	} else {
		s.Derived.Keep = existing
	}
}

// planAllocation decides where each cluster's clients send this Service's traffic when its
// exports prefer the same cluster or carry cluster selectors (then by their tiers), and returns
// the annotation to publish ("" for none). Every member decides it with the same pure function
// from the same broker state, and the previous annotation carries the hysteresis.
func (s *Sync) planAllocation(in Input, have string) string {
	tiered := len(s.selection.selectors) > 0
	if (!s.merged.PrefersSameCluster() && !tiered) || len(s.merged.Clusters) == 0 {
		return ""
	}
	members, zones := localityMembers(in.Members, in.Sources, s.merged.Clusters), prefersZone(s.merged.Spec.TrafficDistribution)
	var pub locality.Publication
	if tiered {
		pub = locality.DecideTiers(members, s.selection.tiers, have, zones, in.Selection, in.Locality)
	} else {
		pub = locality.Decide(members, have, zones, in.Locality)
	}
	if pub.Annotation != have {
		s.Allocation = &pub
	}
	return pub.Annotation
}

// localityMembers adds to every live member the ready endpoints it exports; an exporter with
// no Lease to publish CPU counts as a cluster without demand. Whether a member imports the
// Service is not published, and a member without the namespace only makes the allocation more
// cautious, so every live member is a cluster with clients.
func localityMembers(members []locality.Member, sources []sliceplan.Source, exporters []string) []locality.Member {
	byName := make(map[string]locality.Member, len(members))
	for _, m := range members {
		byName[m.Name] = m
	}
	perCluster := map[string][]*discoveryv1.EndpointSlice{}
	for _, src := range sources {
		perCluster[src.Cluster] = append(perCluster[src.Cluster], src.Slice)
	}
	for _, c := range exporters {
		m, ok := byName[c]
		if !ok {
			m = locality.Member{Name: c}
		}
		m.Ready = locality.CountReady(perCluster[c])
		byName[c] = m
	}
	return slicesOfMap(byName) // Allocate sorts by name
}

func slicesOfMap(m map[string]locality.Member) []locality.Member {
	out := make([]locality.Member, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// prefersZone tells whether the merged trafficDistribution keeps traffic in the client's zone,
// the values the EndpointSlice controller honours with same-zone hints.
func prefersZone(td *string) bool {
	return td != nil && (*td == corev1.ServiceTrafficDistributionPreferSameZone || *td == corev1.ServiceTrafficDistributionPreferClose)
}

func setAnnotation(svc *corev1.Service, value string) {
	if value == "" {
		if _, ok := svc.Annotations[allocation.Annotation]; ok {
			svc.Annotations = maps.Clone(svc.Annotations)
			delete(svc.Annotations, allocation.Annotation)
		}
		return
	}
	svc.Annotations = maps.Clone(svc.Annotations)
	if svc.Annotations == nil {
		svc.Annotations = map[string]string{}
	}
	svc.Annotations[allocation.Annotation] = value
}

// sourcesOf keeps the sources of the given clusters.
func sourcesOf(sources []sliceplan.Source, clusters []string) []sliceplan.Source {
	keep := make(map[string]bool, len(clusters))
	for _, c := range clusters {
		keep[c] = true
	}
	var out []sliceplan.Source
	for _, src := range sources {
		if keep[src.Cluster] {
			out = append(out, src)
		}
	}
	return out
}

func sliceTarget(si *mcsv1beta1.ServiceImport, t mcsv1beta1.ServiceImportType, owner *metav1.OwnerReference) sliceplan.Target {
	target := sliceplan.Target{Namespace: si.Namespace, Service: si.Name, Owner: owner}
	if t == mcsv1beta1.ClusterSetIP {
		target.DerivedService = names.DerivedServiceName(si.Namespace, si.Name)
	}
	return target
}

// teardown removes the import of a Service no cluster exports any more. Owner references
// would let the garbage collector do this too, but not as promptly, and not in clusters
// without one.
func teardown(in Input) *Teardown {
	t := &Teardown{Slices: sliceplan.Plan(nil, in.Imported)}
	if d := in.Derived; d != nil && d.Labels[mcsv1beta1.LabelServiceName] == in.Key.Name {
		t.DeleteDerived = d
	}
	if si := in.Import; si != nil && si.DeletionTimestamp == nil {
		t.DeleteImport = si
	}
	return t
}

// OwnerOf references the ServiceImport as the controller of what is derived from it. For a
// ServiceImport this sync creates, the UID is empty until BindOwner fills it in.
func OwnerOf(si *mcsv1beta1.ServiceImport) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: mcsv1beta1.GroupVersion.String(),
		Kind:       mcsv1beta1.ServiceImportKindName,
		Name:       si.Name,
		UID:        si.UID,
		Controller: ptr.To(true),
	}
}

// BindOwner gives obj's reference to the ServiceImport the UID the API server assigned it on
// create; the plan could only name it.
func BindOwner(obj metav1.Object, si *mcsv1beta1.ServiceImport) {
	refs := obj.GetOwnerReferences()
	for i := range refs {
		if refs[i].Kind == mcsv1beta1.ServiceImportKindName && refs[i].Name == si.Name && refs[i].UID == "" {
			refs[i].UID = si.UID
		}
	}
	obj.SetOwnerReferences(refs)
}
