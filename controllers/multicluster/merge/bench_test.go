package merge

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func clusterName(i int) string { return fmt.Sprintf("c%03d", i) }

// benchmarkRecords builds exports that mostly agree, as in a healthy ClusterSet, with a few
// clusters adding a port, clashing on one, or differing in labels, so every path runs.
func benchmarkRecords(clusters int) []Record {
	records := make([]Record, 0, clusters)
	for i := range clusters {
		r := record(clusterName(clusters-1-i), i, ports(tcp("http", 80), tcp("metrics", 9090), udp("dns", 53)),
			labels("app", "cart", "tier", "web"), annotations("owner", "team-shop"))
		switch i % 10 {
		case 3:
			r.Ports = append(r.Ports, tcp(fmt.Sprintf("extra-%d", i), int32(10000+i)))
		case 5:
			r.Ports[0].Port = 8080
		case 7:
			r.ExportedLabels = map[string]string{"app": "cart"}
		case 9:
			r.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyLocal)
		}
		records = append(records, r)
	}
	return records
}

func BenchmarkMerge(b *testing.B) {
	for _, clusters := range []int{3, 100} {
		records := benchmarkRecords(clusters)
		b.Run(fmt.Sprintf("clusters=%d", clusters), func(b *testing.B) {
			b.ReportAllocs()
			var result Result
			for b.Loop() {
				result = Merge(records)
			}
			if len(result.Clusters) != clusters || result.Spec.Type != mcsv1beta1.ClusterSetIP {
				b.Fatalf("unexpected result: %d clusters, type %q", len(result.Clusters), result.Spec.Type)
			}
		})
	}
}
