package endpoints

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// BenchmarkDesired computes the desired state of a Service with a named and
// a numeric port over 10k Pods spread across three zones.
func BenchmarkDesired(b *testing.B) {
	svc := service(servicePorts(
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")},
		corev1.ServicePort{Name: "metrics", Port: 9100, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(9100)},
	))
	nodes := map[string]*corev1.Node{}
	for i := range 30 {
		name := fmt.Sprintf("node-%d", i)
		nodes[name] = builders.MakeNode(name).Zone(fmt.Sprintf("zone-%d", i%3)).Obj()
	}
	pods := make([]*corev1.Pod, 10_000)
	for i := range pods {
		p := pod(fmt.Sprintf("web-%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255))
		p.Spec.NodeName = fmt.Sprintf("node-%d", i%30)
		if i%10 == 0 {
			notReady(p)
		}
		pods[i] = p
	}
	b.ReportAllocs()
	var sets []Set
	for b.Loop() {
		sets = Desired(svc, PodsOf(pods), nodes)
	}
	if len(sets) != 1 || len(sets[0].Endpoints) != len(pods) {
		b.Fatalf("got %d sets", len(sets))
	}
}
