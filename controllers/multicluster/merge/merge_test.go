package merge

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func TestMergeWholeServiceFields(t *testing.T) {
	tests := []struct {
		name    string
		records []Record
		// wantReasons are the reasons every export must carry; empty means no conflict.
		wantReasons []string
		check       func(t *testing.T, r Result)
		// wantMessages maps a cluster to fragments its condition message must contain.
		wantMessages map[string][]string
	}{
		{
			name:    "identical exports agree",
			records: []Record{record("a", 0), record("b", 1), record("c", 2)},
		},
		{
			name:        "headless newer export loses the type to the oldest",
			records:     []Record{record("a", 0), record("b", 5, headless)},
			wantReasons: []string{"TypeConflict"},
			check: func(t *testing.T, r Result) {
				if r.Spec.Type != mcsv1beta1.ClusterSetIP {
					t.Errorf("type = %q, want ClusterSetIP", r.Spec.Type)
				}
			},
			wantMessages: map[string][]string{
				"b": {`type: this export has "Headless", but "ClusterSetIP" from cluster "a" is used`},
				"a": {`type: "ClusterSetIP" from this export is used; cluster "b" differs`},
			},
		},
		{
			name:        "the oldest wins even when its cluster id sorts last",
			records:     []Record{record("a", 9), record("z", 3, headless)},
			wantReasons: []string{"TypeConflict"},
			check: func(t *testing.T, r Result) {
				if r.Spec.Type != mcsv1beta1.Headless || r.OldestCluster != "z" {
					t.Errorf("type = %q from %q, want Headless from z", r.Spec.Type, r.OldestCluster)
				}
			},
		},
		{
			name:        "equal timestamps: the lower cluster id wins",
			records:     []Record{record("west", 4, headless), record("east", 4)},
			wantReasons: []string{"TypeConflict"},
			check: func(t *testing.T, r Result) {
				if r.Spec.Type != mcsv1beta1.ClusterSetIP || r.OldestCluster != "east" {
					t.Errorf("type = %q from %q, want ClusterSetIP from east", r.Spec.Type, r.OldestCluster)
				}
			},
		},
		{
			name:        "session affinity",
			records:     []Record{record("a", 0, clientIPAffinity(nil)), record("b", 1)},
			wantReasons: []string{"SessionAffinityConflict"},
			check: func(t *testing.T, r Result) {
				if r.Spec.SessionAffinity != corev1.ServiceAffinityClientIP {
					t.Errorf("sessionAffinity = %q, want ClientIP", r.Spec.SessionAffinity)
				}
			},
		},
		{
			name:    "unset session affinity means None",
			records: []Record{record("a", 0), record("b", 1, func(r *Record) { r.SessionAffinity = "" })},
		},
		{
			name:        "session affinity timeout",
			records:     []Record{record("a", 0, clientIPAffinity(ptr.To[int32](60))), record("b", 1, clientIPAffinity(ptr.To[int32](600)))},
			wantReasons: []string{"SessionAffinityConfigConflict"},
			check: func(t *testing.T, r Result) {
				if got := affinityTimeout(r.Spec.SessionAffinityConfig); got == nil || *got != 60 {
					t.Errorf("timeout = %v, want 60", got)
				}
			},
			wantMessages: map[string][]string{"b": {"this export has clientIP.timeoutSeconds=600, but clientIP.timeoutSeconds=60"}},
		},
		{
			name: "an empty session affinity config equals none",
			records: []Record{record("a", 0, clientIPAffinity(nil)), record("b", 1, clientIPAffinity(nil), func(r *Record) {
				r.SessionAffinityConfig = &corev1.SessionAffinityConfig{}
			})},
		},
		{
			name:        "exported labels: the oldest set wins as a whole",
			records:     []Record{record("a", 0, labels("tier", "web")), record("b", 1, labels("tier", "web", "team", "x"))},
			wantReasons: []string{"LabelsConflict"},
			check: func(t *testing.T, r Result) {
				if !reflect.DeepEqual(r.Labels, map[string]string{"tier": "web"}) {
					t.Errorf("labels = %v, want only tier=web", r.Labels)
				}
			},
			wantMessages: map[string][]string{"b": {`exportedLabels: this export's differ from those of cluster "a", which are used`}},
		},
		{
			name: "cluster selectors: the oldest list wins, ClusterSelectorsConflict on every export (KEP-5939)",
			records: []Record{record("a", 0, selectors(regionFirst)), record("b", 1, selectors(regionFirst[:1])),
				record("c", 2, selectors(regionFirst))},
			wantReasons: []string{"ClusterSelectorsConflict"},
			check: func(t *testing.T, r Result) {
				if !reflect.DeepEqual(r.ClusterSelectors, regionFirst) {
					t.Errorf("selectors = %+v, want the oldest's", r.ClusterSelectors)
				}
			},
			wantMessages: map[string][]string{
				"b": {`annotation fleetslice.io/cluster-selectors: this export has [{"propertySelector":{"matchProperties":{"region.topology.k8s.io":"@SameAsImporter@"}}}], but [{`, `from cluster "a" is used`},
				"c": {`from cluster "a" is used; cluster "b" differs`},
			},
		},
		{
			name:    "cluster selectors: no selectors and an empty list agree",
			records: []Record{record("a", 0), record("b", 1, selectors(regionFirst[:0]))},
		},
		{
			name:    "no labels and an empty label set agree",
			records: []Record{record("a", 0), record("b", 1, labels())},
		},
		{
			name:        "exported annotations",
			records:     []Record{record("a", 0, annotations("note", "1")), record("b", 1, annotations("note", "2"))},
			wantReasons: []string{"AnnotationsConflict"},
			check: func(t *testing.T, r Result) {
				if r.Annotations["note"] != "1" {
					t.Errorf("annotations = %v, want note=1", r.Annotations)
				}
			},
		},
		{
			name:        "internal traffic policy",
			records:     []Record{record("a", 0, trafficPolicy(ptr.To(corev1.ServiceInternalTrafficPolicyLocal))), record("b", 1)},
			wantReasons: []string{"InternalTrafficPolicyConflict"},
			check: func(t *testing.T, r Result) {
				if r.Spec.InternalTrafficPolicy == nil || *r.Spec.InternalTrafficPolicy != corev1.ServiceInternalTrafficPolicyLocal {
					t.Errorf("internalTrafficPolicy = %v, want Local", r.Spec.InternalTrafficPolicy)
				}
			},
		},
		{
			name:    "unset internal traffic policy means Cluster",
			records: []Record{record("a", 0, trafficPolicy(nil)), record("b", 1)},
		},
		{
			name:        "traffic distribution",
			records:     []Record{record("a", 0), record("b", 1, distribution(ptr.To(corev1.ServiceTrafficDistributionPreferClose)))},
			wantReasons: []string{"TrafficDistributionConflict"},
			check: func(t *testing.T, r Result) {
				if r.Spec.TrafficDistribution != nil {
					t.Errorf("trafficDistribution = %q, want unset", *r.Spec.TrafficDistribution)
				}
			},
			wantMessages: map[string][]string{"b": {`this export has "PreferClose", but unset from cluster "a" is used`}},
		},
		{
			name: "the oldest export's cluster preference is used",
			records: []Record{
				record("a", 0, clusterDistribution("PreferSameCluster")),
				record("b", 1, clusterDistribution("PreferSameCluster")),
			},
			check: func(t *testing.T, r Result) {
				if r.ClusterTrafficDistribution != "PreferSameCluster" || !r.PrefersSameCluster() {
					t.Errorf("cluster traffic distribution = %q, want PreferSameCluster", r.ClusterTrafficDistribution)
				}
			},
		},
		{
			name:        "exporters disagree on the cluster preference: the oldest wins, with a conflict",
			records:     []Record{record("a", 0), record("b", 1, clusterDistribution("PreferSameCluster"))},
			wantReasons: []string{"ClusterTrafficDistributionConflict"},
			check: func(t *testing.T, r Result) {
				if r.ClusterTrafficDistribution != "" || r.PrefersSameCluster() {
					t.Errorf("cluster traffic distribution = %q, want unset", r.ClusterTrafficDistribution)
				}
			},
			wantMessages: map[string][]string{
				"b": {`annotation fleetslice.io/traffic-distribution: this export has "PreferSameCluster", but unset from cluster "a" is used`},
				"a": {`annotation fleetslice.io/traffic-distribution: unset from this export is used; cluster "b" differs`},
			},
		},
		{
			name:    "an empty cluster preference is no preference",
			records: []Record{record("a", 0, clusterDistribution("")), record("b", 1)},
		},
		{
			name: "an unknown cluster preference is carried, but prefers nothing",
			records: []Record{
				record("a", 0, clusterDistribution("PreferSameClutser")),
				record("b", 1, clusterDistribution("PreferSameCluster")),
			},
			wantReasons: []string{"ClusterTrafficDistributionConflict"},
			check: func(t *testing.T, r Result) {
				if r.ClusterTrafficDistribution != "PreferSameClutser" || r.PrefersSameCluster() {
					t.Errorf("cluster traffic distribution = %q (prefers %v)", r.ClusterTrafficDistribution, r.PrefersSameCluster())
				}
			},
		},
		{
			name:        "single stack against dual stack",
			records:     []Record{record("a", 0), record("b", 1, families(corev1.IPv4Protocol, corev1.IPv6Protocol))},
			wantReasons: []string{"IPFamilyConflict"},
			check: func(t *testing.T, r Result) {
				if !slices.Equal(r.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv4Protocol}) {
					t.Errorf("ipFamilies = %v, want [IPv4]", r.Spec.IPFamilies)
				}
			},
		},
		{
			name: "dual stack with another primary family agrees; the oldest order is kept",
			records: []Record{
				record("a", 0, families(corev1.IPv6Protocol, corev1.IPv4Protocol)),
				record("b", 1, families(corev1.IPv4Protocol, corev1.IPv6Protocol)),
			},
			check: func(t *testing.T, r Result) {
				if !slices.Equal(r.Spec.IPFamilies, []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}) {
					t.Errorf("ipFamilies = %v, want [IPv6 IPv4]", r.Spec.IPFamilies)
				}
			},
		},
		{
			name: "every kind of conflict at once, in the documented order",
			records: []Record{
				record("a", 0),
				record("b", 1, ports(tcp("http", 8080)), headless, clientIPAffinity(ptr.To[int32](5)), labels("x", "y"),
					annotations("x", "y"), trafficPolicy(ptr.To(corev1.ServiceInternalTrafficPolicyLocal)),
					distribution(ptr.To("PreferClose")), clusterDistribution("PreferSameCluster"), families(corev1.IPv6Protocol)),
			},
			wantReasons: []string{
				"PortConflict", "TypeConflict", "SessionAffinityConflict", "SessionAffinityConfigConflict",
				"LabelsConflict", "AnnotationsConflict", "InternalTrafficPolicyConflict",
				"TrafficDistributionConflict", "ClusterTrafficDistributionConflict", "IPFamilyConflict",
			},
		},
		{
			name:        "an export that agrees with the oldest is still told about the conflict",
			records:     []Record{record("a", 0), record("b", 1), record("c", 2, headless)},
			wantReasons: []string{"TypeConflict"},
			wantMessages: map[string][]string{
				"b": {`"ClusterSetIP" from cluster "a" is used; cluster "c" differs`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result := Merge(tc.records)
			if got := reasonsOf(result); !slices.Equal(got, tc.wantReasons) && (len(got) > 0 || len(tc.wantReasons) > 0) {
				t.Fatalf("reasons = %v, want %v", got, tc.wantReasons)
			}
			wantReason := strings.Join(tc.wantReasons, ",")
			if wantReason == "" {
				wantReason = "NoConflicts"
			}
			if len(result.Conflicts) != len(tc.records) {
				t.Fatalf("got %d conflict entries for %d exports", len(result.Conflicts), len(tc.records))
			}
			for _, c := range result.Conflicts {
				if c.Reason != wantReason || c.Conflict != (len(tc.wantReasons) > 0) {
					t.Errorf("cluster %s: conflict=%v reason=%q, want reason %q", c.Cluster, c.Conflict, c.Reason, wantReason)
				}
				if c.Message == "" {
					t.Errorf("cluster %s: empty message", c.Cluster)
				}
			}
			for cluster, fragments := range tc.wantMessages {
				c, ok := result.ConflictFor(cluster)
				if !ok {
					t.Fatalf("no conflict entry for cluster %s", cluster)
				}
				for _, fragment := range fragments {
					if !strings.Contains(c.Message, fragment) {
						t.Errorf("cluster %s message %q lacks %q", cluster, c.Message, fragment)
					}
				}
			}
			if tc.check != nil {
				tc.check(t, result)
			}
		})
	}
}

func TestMergeWithoutRecords(t *testing.T) {
	if got := Merge(nil); !reflect.DeepEqual(got, Result{}) {
		t.Fatalf("Merge(nil) = %+v, want the zero Result", got)
	}
}

func TestMergeSingleExportCopiesItsFields(t *testing.T) {
	only := record("solo", 0, headless, clientIPAffinity(ptr.To[int32](30)), labels("a", "b"), annotations("c", "d"),
		distribution(ptr.To("PreferClose")), families(corev1.IPv6Protocol, corev1.IPv4Protocol),
		ports(tcp("web", 80), udp("dns", 53)))
	result := Merge([]Record{only})
	want := mcsv1beta1.ServiceImportSpec{
		Type:                  mcsv1beta1.Headless,
		Ports:                 []mcsv1beta1.ServicePort{udp("dns", 53), tcp("web", 80)},
		SessionAffinity:       corev1.ServiceAffinityClientIP,
		SessionAffinityConfig: only.SessionAffinityConfig,
		IPFamilies:            only.IPFamilies,
		InternalTrafficPolicy: only.InternalTrafficPolicy,
		TrafficDistribution:   only.TrafficDistribution,
	}
	if !reflect.DeepEqual(result.Spec, want) {
		t.Fatalf("spec = %+v\nwant %+v", result.Spec, want)
	}
	if !reflect.DeepEqual(result.Labels, only.ExportedLabels) || !reflect.DeepEqual(result.Annotations, only.ExportedAnnotations) {
		t.Fatalf("labels %v annotations %v, want the export's", result.Labels, result.Annotations)
	}
	c, _ := result.ConflictFor("solo")
	cond := c.Condition()
	if cond.Type != "Conflict" || cond.Status != metav1.ConditionFalse || cond.Reason != "NoConflicts" {
		t.Fatalf("condition = %+v, want Conflict=False NoConflicts", cond)
	}
	// A second, agreeing export must leave the first one's condition as it was, or every peer
	// that exports rewrites every export's status.
	second := only
	second.ClusterID = "peer"
	withPeer, _ := Merge([]Record{only, second}).ConflictFor("solo")
	if after := withPeer.Condition(); after != cond {
		t.Fatalf("condition changed from %+v to %+v when an agreeing peer exported", cond, after)
	}
}

func TestMergeResultDoesNotAliasRecords(t *testing.T) {
	records := []Record{record("a", 0, labels("k", "v"), clientIPAffinity(ptr.To[int32](7)), ports(withApp(tcp("h", 1), "http")))}
	result := Merge(records)
	records[0].ExportedLabels["k"] = "changed"
	*records[0].SessionAffinityConfig.ClientIP.TimeoutSeconds = 99
	*records[0].Ports[0].AppProtocol = "changed"
	records[0].IPFamilies[0] = corev1.IPv6Protocol
	if result.Labels["k"] != "v" || *result.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds != 7 ||
		*result.Spec.Ports[0].AppProtocol != "http" || result.Spec.IPFamilies[0] != corev1.IPv4Protocol {
		t.Fatalf("changing the input changed the result: %+v", result)
	}
}

func TestMergeDuplicateRecordsOfOneCluster(t *testing.T) {
	older := record("a", 0, headless)
	newer := record("a", 10)
	for _, input := range [][]Record{{older, newer}, {newer, older}} {
		result := Merge(input)
		if result.DuplicateRecords != 1 || !slices.Equal(result.Clusters, []string{"a"}) {
			t.Fatalf("duplicates=%d clusters=%v, want 1 and [a]", result.DuplicateRecords, result.Clusters)
		}
		if result.Spec.Type != mcsv1beta1.Headless || len(result.Reasons) != 0 {
			t.Fatalf("type=%q reasons=%v, want the older record alone", result.Spec.Type, result.Reasons)
		}
	}
	// Same age and cluster but different content: the pick must not depend on input order.
	x := record("a", 0, labels("v", "1"))
	y := record("a", 0, labels("v", "2"))
	if !reflect.DeepEqual(Merge([]Record{x, y}), Merge([]Record{y, x})) {
		t.Fatal("the record kept for a duplicated cluster depends on input order")
	}
}

func TestMergeListsClustersSortedAndFindsThem(t *testing.T) {
	result := Merge([]Record{record("c", 0), record("a", 2), record("b", 1)})
	if !slices.Equal(result.Clusters, []string{"a", "b", "c"}) {
		t.Fatalf("clusters = %v, want [a b c]", result.Clusters)
	}
	if result.OldestCluster != "c" {
		t.Fatalf("oldest = %q, want c", result.OldestCluster)
	}
	if _, ok := result.ConflictFor("d"); ok {
		t.Fatal("ConflictFor found a cluster that does not export")
	}
	for _, cluster := range result.Clusters {
		if c, ok := result.ConflictFor(cluster); !ok || c.Cluster != cluster {
			t.Fatalf("ConflictFor(%q) = %+v, %v", cluster, c, ok)
		}
	}
}

func TestConflictMessagesStayShortWithManyClusters(t *testing.T) {
	var records []Record
	for i := range 100 {
		records = append(records, record(clusterName(i), i, ports(tcp("http", int32(1000+i)))))
	}
	result := Merge(records)
	c, _ := result.ConflictFor(clusterName(0))
	if !strings.Contains(c.Message, "and 94 more") || len(c.Message) > 1000 {
		t.Fatalf("message for the oldest (%d bytes) = %q", len(c.Message), c.Message)
	}
}

func TestTruncateKeepsRuneBoundaries(t *testing.T) {
	s := strings.Repeat("é", 10)
	got := truncate(s, 8)
	if got != "éé..." {
		t.Fatalf("truncate = %q, want %q", got, "éé...")
	}
	if truncate("short", 8) != "short" {
		t.Fatal("truncate changed a short string")
	}
}
