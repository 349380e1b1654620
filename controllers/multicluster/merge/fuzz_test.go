package merge

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterselect"
)

// byteSource turns fuzz input into choices; past the end it keeps answering zero so that
// every input, however short, describes a complete set of records.
type byteSource struct {
	data []byte
	next int
}

func (s *byteSource) pick(n int) int {
	if s.next >= len(s.data) {
		return 0
	}
	b := s.data[s.next]
	s.next++
	return int(b) % n
}

// Small value domains on purpose: collisions (same cluster, same age, same port name) are
// where the merge rules get interesting.
func (s *byteSource) record() Record {
	clusters := []string{"a", "b", "c", "d", "e"}
	r := record(clusters[s.pick(len(clusters))], s.pick(4))
	r.Type = []mcsv1beta1.ServiceImportType{mcsv1beta1.ClusterSetIP, mcsv1beta1.Headless}[s.pick(2)]
	r.Ports = nil
	for range s.pick(5) {
		p := mcsv1beta1.ServicePort{
			Name:     []string{"", "http", "grpc", "dns"}[s.pick(4)],
			Protocol: []corev1.Protocol{"", corev1.ProtocolTCP, corev1.ProtocolUDP}[s.pick(3)],
			Port:     []int32{53, 80, 81}[s.pick(3)],
		}
		if s.pick(3) == 0 {
			p.AppProtocol = ptr.To("h2c")
		}
		r.Ports = append(r.Ports, p)
	}
	r.SessionAffinity = []corev1.ServiceAffinity{"", corev1.ServiceAffinityNone, corev1.ServiceAffinityClientIP}[s.pick(3)]
	r.SessionAffinityConfig = []*corev1.SessionAffinityConfig{
		nil,
		{},
		{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10)}},
		{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](20)}},
	}[s.pick(4)]
	r.IPFamilies = [][]corev1.IPFamily{
		nil,
		{corev1.IPv4Protocol},
		{corev1.IPv6Protocol},
		{corev1.IPv4Protocol, corev1.IPv6Protocol},
		{corev1.IPv6Protocol, corev1.IPv4Protocol},
	}[s.pick(5)]
	r.InternalTrafficPolicy = []*corev1.ServiceInternalTrafficPolicy{
		nil, ptr.To(corev1.ServiceInternalTrafficPolicyCluster), ptr.To(corev1.ServiceInternalTrafficPolicyLocal),
	}[s.pick(3)]
	r.TrafficDistribution = []*string{nil, ptr.To(""), ptr.To("PreferClose")}[s.pick(3)]
	r.ClusterTrafficDistribution = []*string{nil, ptr.To(""), ptr.To("PreferSameCluster"), ptr.To("Other")}[s.pick(4)]
	r.ClusterSelectors = [][]v1alpha1.ClusterSelector{nil, regionFirst[:0], regionFirst, regionFirst[:1], regionFirst[1:]}[s.pick(5)]
	sets := []map[string]string{nil, {}, {"k": "1"}, {"k": "2"}}
	r.ExportedLabels = sets[s.pick(len(sets))]
	r.ExportedAnnotations = sets[s.pick(len(sets))]
	return r
}

// recordsOf returns one to six records, each made by next.
func (s *byteSource) recordsOf(next func() Record) []Record {
	n := 1 + s.pick(6)
	out := make([]Record, n)
	for i := range out {
		out[i] = next()
	}
	return out
}

// checkMergeInvariants holds for every merge: the same result in any input order, a condition
// for every cluster that reports each conflict, the oldest export's fields, ports only from some
// export, a port conflict exactly when the port sets differ, and the merged cluster preference.
func checkMergeInvariants(t *testing.T, records []Record, result Result, source *byteSource) {
	t.Helper()
	for _, permuted := range permutations(records, source) {
		if again := Merge(permuted); !reflect.DeepEqual(again, result) {
			t.Fatalf("input order changed the result:\n%+v\nvs\n%+v", result, again)
		}
	}
	checkClustersAndConditions(t, records, result)
	checkOldestWins(t, records, result)
	checkPorts(t, records, result)
	checkPortConflictIffSetsDiffer(t, records, result)
	checkClusterPreference(t, records, result)
}

func FuzzMerge(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 1, 1, 1, 0, 80})
	f.Add([]byte{2, 0, 0, 0, 1, 1, 1, 1, 0, 1, 2, 0, 3, 1, 2, 2, 2, 1, 3, 1, 1, 1, 1, 1, 2, 2, 3, 3})
	f.Add([]byte("three clusters that disagree about almost everything, twice over and then some"))
	f.Add([]byte{5, 4, 3, 2, 1, 0, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 200, 100, 50, 25, 12, 6, 3, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		source := &byteSource{data: data}
		records := source.recordsOf(source.record)
		result := Merge(records)
		checkMergeInvariants(t, records, result, source)

		for _, r := range records {
			if single := Merge([]Record{r}); len(single.Reasons) != 0 || single.Conflicts[0].Conflict {
				t.Fatalf("a single export conflicts with itself: %+v", single.Conflicts)
			}
		}
		clones := make([]Record, 0, 3)
		for i, cluster := range []string{"x", "y", "z"} {
			clone := records[0]
			clone.ClusterID = cluster
			clone.ExportCreationTimestamp.Time = clone.ExportCreationTimestamp.Add(-time.Duration(i) * time.Second)
			clones = append(clones, clone)
		}
		if same := Merge(clones); len(same.Reasons) != 0 {
			t.Fatalf("identical exports conflict: %v", same.Reasons)
		}
	})
}

func permutations(records []Record, source *byteSource) [][]Record {
	reversed := slices.Clone(records)
	slices.Reverse(reversed)
	shuffled := slices.Clone(records)
	for i := len(shuffled) - 1; i > 0; i-- {
		j := source.pick(i + 1)
		shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
	}
	return [][]Record{reversed, shuffled}
}

func checkClustersAndConditions(t *testing.T, records []Record, result Result) {
	t.Helper()
	var want []string
	for _, r := range records {
		want = append(want, r.ClusterID)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(result.Clusters, want) {
		t.Fatalf("clusters = %v, want %v", result.Clusters, want)
	}
	if result.DuplicateRecords != len(records)-len(want) {
		t.Fatalf("duplicates = %d, want %d", result.DuplicateRecords, len(records)-len(want))
	}
	if len(result.Conflicts) != len(want) {
		t.Fatalf("%d conflict entries for %d clusters", len(result.Conflicts), len(want))
	}
	var joined []string
	last := -1
	for _, reason := range result.Reasons {
		i := slices.Index(ConflictReasonOrder, reason)
		if i <= last {
			t.Fatalf("reasons %v are not in the documented order without repeats", result.Reasons)
		}
		last = i
		joined = append(joined, string(reason))
	}
	wantReason := strings.Join(joined, ",")
	if wantReason == "" {
		wantReason = string(mcsv1beta1.ServiceExportReasonNoConflicts)
	}
	for i, c := range result.Conflicts {
		if c.Cluster != want[i] {
			t.Fatalf("conflict entry %d is for %q, want %q", i, c.Cluster, want[i])
		}
		if c.Reason != wantReason || c.Conflict != (len(result.Reasons) > 0) || c.Message == "" {
			t.Fatalf("cluster %s: %+v, want reason %q", c.Cluster, c, wantReason)
		}
	}
}

// checkOldestWins asserts each merged whole-Service field is the oldest export's value.
func checkOldestWins(t *testing.T, records []Record, result Result) {
	t.Helper()
	oldest := slices.MinFunc(records, func(a, b Record) int { return compareAge(&a, &b) })
	if result.OldestCluster != oldest.ClusterID {
		t.Fatalf("oldest cluster = %q, want %q", result.OldestCluster, oldest.ClusterID)
	}
	// A duplicated cluster may have several records of the oldest age; one of them must match.
	for _, r := range records {
		if compareAge(&r, &oldest) != 0 {
			continue
		}
		if r.Type == result.Spec.Type &&
			r.SessionAffinity == result.Spec.SessionAffinity &&
			reflect.DeepEqual(r.SessionAffinityConfig, result.Spec.SessionAffinityConfig) &&
			slices.Equal(r.IPFamilies, result.Spec.IPFamilies) &&
			reflect.DeepEqual(r.InternalTrafficPolicy, result.Spec.InternalTrafficPolicy) &&
			reflect.DeepEqual(r.TrafficDistribution, result.Spec.TrafficDistribution) &&
			stringOrEmpty(r.ClusterTrafficDistribution) == result.ClusterTrafficDistribution &&
			maps.Equal(r.ExportedLabels, result.Labels) &&
			maps.Equal(r.ExportedAnnotations, result.Annotations) {
			return
		}
	}
	t.Fatalf("merged fields %+v (labels %v, annotations %v) are not the oldest export's", result.Spec, result.Labels, result.Annotations)
}

func checkPorts(t *testing.T, records []Record, result Result) {
	t.Helper()
	merged := result.Spec.Ports
	if !slices.IsSortedFunc(merged, comparePorts) {
		t.Fatalf("ports are not sorted: %v", merged)
	}
	names := map[string]bool{}
	keys := map[protocolPort]bool{}
	for _, p := range merged {
		if names[p.Name] || keys[keyOf(p)] {
			t.Fatalf("two merged ports share a name or protocol and number: %v", merged)
		}
		if p.Name == "" && len(merged) > 1 {
			t.Fatalf("an unnamed port beside others, which no derived Service could carry: %v", merged)
		}
		names[p.Name] = true
		keys[keyOf(p)] = true
	}
	portConflict := slices.Contains(result.Reasons, mcsv1beta1.ServiceExportReasonPortConflict)
	for _, p := range merged {
		if !slices.ContainsFunc(records, func(r Record) bool {
			return slices.ContainsFunc(r.Ports, func(q mcsv1beta1.ServicePort) bool { return reflect.DeepEqual(p, q) })
		}) {
			t.Fatalf("merged port %v comes from no export", p)
		}
	}
	perCluster := map[string]int{}
	for _, r := range records {
		perCluster[r.ClusterID]++
	}
	for _, r := range records {
		if perCluster[r.ClusterID] > 1 {
			// Only one record of a duplicated cluster takes part in the merge.
			continue
		}
		for _, p := range distinctPorts(r.Ports) {
			present := slices.ContainsFunc(merged, func(q mcsv1beta1.ServicePort) bool { return samePort(p, q) })
			// An unnamed port clashes with any other, as a Service must name each of several.
			clashes := names[p.Name] || keys[keyOf(p)] || (len(merged) > 0 && (p.Name == "" || names[""]))
			if !present && !clashes {
				t.Fatalf("port %v of cluster %s neither merged nor clashing: %v", p, r.ClusterID, merged)
			}
			if !present && !portConflict {
				t.Fatalf("port %v of cluster %s was dropped without a PortConflict", p, r.ClusterID)
			}
		}
	}
	// Nothing clashes with the oldest export's ports: all of them are in the import.
	oldest := slices.MinFunc(records, func(a, b Record) int { return compareAge(&a, &b) })
	if !slices.ContainsFunc(records, func(r Record) bool {
		return compareAge(&r, &oldest) == 0 && !slices.ContainsFunc(distinctPorts(r.Ports), func(p mcsv1beta1.ServicePort) bool {
			return !slices.ContainsFunc(merged, func(q mcsv1beta1.ServicePort) bool { return reflect.DeepEqual(p, q) })
		})
	}) {
		t.Fatalf("the oldest export's ports are not all merged: %v", merged)
	}
}

// checkPortConflictIffSetsDiffer asserts the API's rule: PortConflict exactly when some
// export's ports are not the oldest export's (as sets, protocol defaulted to TCP).
func checkPortConflictIffSetsDiffer(t *testing.T, records []Record, result Result) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range records {
		if seen[r.ClusterID] {
			// Which record of a duplicated cluster takes part is Merge's choice; skip.
			return
		}
		seen[r.ClusterID] = true
	}
	oldest := slices.MinFunc(records, func(a, b Record) int { return compareAge(&a, &b) })
	subset := func(a, b []mcsv1beta1.ServicePort) bool {
		for _, p := range a {
			if !slices.ContainsFunc(b, func(q mcsv1beta1.ServicePort) bool { return samePort(p, q) }) {
				return false
			}
		}
		return true
	}
	want := false
	for _, r := range records {
		mine, theirs := distinctPorts(r.Ports), distinctPorts(oldest.Ports)
		if !subset(mine, theirs) || !subset(theirs, mine) {
			want = true
		}
	}
	if got := slices.Contains(result.Reasons, mcsv1beta1.ServiceExportReasonPortConflict); got != want {
		t.Fatalf("PortConflict = %v, want %v (ports differ from the oldest's): %+v", got, want, records)
	}
}

// checkClusterPreference asserts that ClusterTrafficDistributionConflict is raised exactly when
// some export's fleetslice.io/traffic-distribution differs from the oldest's, and that the
// merged preference is a PreferSameCluster only when the oldest export asks for it.
func checkClusterPreference(t *testing.T, records []Record, result Result) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range records {
		if seen[r.ClusterID] {
			return // which record of a duplicated cluster takes part is Merge's choice
		}
		seen[r.ClusterID] = true
	}
	oldest := slices.MinFunc(records, func(a, b Record) int { return compareAge(&a, &b) })
	want := slices.ContainsFunc(records, func(r Record) bool {
		return stringOrEmpty(r.ClusterTrafficDistribution) != stringOrEmpty(oldest.ClusterTrafficDistribution)
	})
	if got := slices.Contains(result.Reasons, ReasonClusterTrafficDistributionConflict); got != want {
		t.Fatalf("ClusterTrafficDistributionConflict = %v, want %v: %+v", got, want, records)
	}
	if result.PrefersSameCluster() != (stringOrEmpty(oldest.ClusterTrafficDistribution) == "PreferSameCluster") {
		t.Fatalf("PrefersSameCluster = %v for the oldest's %q", result.PrefersSameCluster(), stringOrEmpty(oldest.ClusterTrafficDistribution))
	}
	// KEP-5939: the oldest export's selectors, ClusterSelectorsConflict exactly when any differ.
	differ := slices.ContainsFunc(records, func(r Record) bool { return !clusterselect.Equal(r.ClusterSelectors, oldest.ClusterSelectors) })
	if got := slices.Contains(result.Reasons, ReasonClusterSelectorsConflict); got != differ {
		t.Fatalf("ClusterSelectorsConflict = %v, want %v", got, differ)
	}
	if !clusterselect.Equal(result.ClusterSelectors, oldest.ClusterSelectors) {
		t.Fatalf("merged selectors %s, the oldest's %s", clusterselect.Format(result.ClusterSelectors), clusterselect.Format(oldest.ClusterSelectors))
	}
}
