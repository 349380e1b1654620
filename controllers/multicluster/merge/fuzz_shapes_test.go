package merge

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// The bad-input shapes of issue 13, on top of the small domains of byteSource.record.
const (
	shapePlain = iota
	shapeHundredPorts
	shapeLongestNames
	shapeDualStackHeadless
	shapeFlippedProtocols
	shapeCount
)

// maxClusterID is clusterid.MaxLength; the pure merge package imports no controller code.
const maxClusterID = 56

// shapedRecord is a record of one of the bad-input shapes.
func (s *byteSource) shapedRecord() Record {
	r := s.record()
	switch s.pick(shapeCount) {
	case shapeHundredPorts:
		// 100 ports whose names and numbers sometimes repeat, over every protocol.
		r.Ports = nil
		for i := range 100 {
			p := mcsv1beta1.ServicePort{
				Name:     fmt.Sprintf("p%d", i),
				Protocol: []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}[s.pick(3)],
				Port:     int32(1000 + i),
			}
			switch s.pick(4) {
			case 1:
				p.Port = int32(1000 + i%7) // numbers shared with other ports
			case 2:
				p.Name = fmt.Sprintf("p%d", i%7) // names shared with other ports
			}
			r.Ports = append(r.Ports, p)
		}
	case shapeLongestNames:
		// A cluster id, namespace, name, port name and label at their greatest lengths.
		r.ClusterID = strings.Repeat(r.ClusterID, maxClusterID)
		r.ServiceNamespace = strings.Repeat("n", 63)
		r.ServiceName = strings.Repeat("s", 63)
		for i := range r.Ports {
			r.Ports[i].Name = strings.Repeat(string(rune('a'+i%26)), 63)
		}
		if s.pick(2) == 0 {
			r.ExportedLabels = map[string]string{"example.com/" + strings.Repeat("k", 63): strings.Repeat("v", 63)}
		}
	case shapeDualStackHeadless:
		r.Type = mcsv1beta1.Headless
		r.IPFamilies = [][]corev1.IPFamily{
			{corev1.IPv4Protocol, corev1.IPv6Protocol}, {corev1.IPv6Protocol, corev1.IPv4Protocol}, {corev1.IPv6Protocol},
		}[s.pick(3)]
	case shapeFlippedProtocols:
		// The same names and numbers as a plain record, every protocol turned.
		for i := range r.Ports {
			switch r.Ports[i].Protocol {
			case corev1.ProtocolUDP:
				r.Ports[i].Protocol = corev1.ProtocolSCTP
			default:
				r.Ports[i].Protocol = corev1.ProtocolUDP
			}
		}
	}
	return r
}

// FuzzMergeBadShapes runs the merge over exports of the bad-input shapes mixed with plain ones.
// Beyond FuzzMerge's invariants (same result in any order, every cluster with a condition that
// reports each conflict, the oldest export's fields, ports only from some export): Merge never
// panics, gives the same result twice, and every Conflict condition is one the API server
// accepts, however many ports and however long the names.
func FuzzMergeBadShapes(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 0, 0, 0, 1, 1, 0, 0, 1})                            // one export of 100 ports
	f.Add([]byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 1}) // long names
	f.Add([]byte{5, 1, 2, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3})
	f.Add([]byte("six clusters of a hundred ports and the longest names, none of them agreeing on anything"))
	f.Fuzz(func(t *testing.T, data []byte) {
		source := &byteSource{data: data}
		records := source.recordsOf(source.shapedRecord)
		result := Merge(records)
		if again := Merge(slices.Clone(records)); !reflect.DeepEqual(again, result) {
			t.Fatalf("two merges of the same records differ:\n%+v\nvs\n%+v", result, again)
		}
		checkMergeInvariants(t, records, result, source)
		checkConditionsAreValid(t, result)
	})
}

// checkConditionsAreValid asserts that the API server would store every Conflict condition:
// reason and message within their patterns and lengths.
func checkConditionsAreValid(t *testing.T, result Result) {
	t.Helper()
	for _, c := range result.Conflicts {
		cond := c.Condition()
		cond.LastTransitionTime = metav1.NewTime(time.Unix(1, 0))
		cond.ObservedGeneration = 1
		if errs := metav1validation.ValidateCondition(cond, field.NewPath("status", "conditions").Index(0)); len(errs) > 0 {
			t.Fatalf("cluster %s's Conflict condition would be refused (%d-byte message): %v", c.Cluster, len(cond.Message), errs.ToAggregate())
		}
	}
}
