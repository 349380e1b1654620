package slicediff

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

const (
	namespace   = "bench"
	serviceName = "web"
	// maxPerSlice is both controllers' default and the size of every slice they fill.
	maxPerSlice = 100
)

var (
	serviceKey = types.NamespacedName{Namespace: namespace, Name: serviceName}
	zones      = []string{"zone-a", "zone-b", "zone-c"}
	// epoch is the scenarios' clock origin: a fixed time, so every run writes the same bytes.
	epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

func nodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// nodeObject is a ready worker Node with 4 CPUs, as the topology code of both controllers
// wants to see it.
func nodeObject(i int, zone string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: nodeName(i), UID: types.UID(fmt.Sprintf("00000000-0000-4000-9000-%012d", i)),
			Labels: map[string]string{corev1.LabelTopologyZone: zone, corev1.LabelHostname: nodeName(i)},
		},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

// serviceObject is the Service every scenario measures; autoTopology opts it into
// CPU-proportional zone hints.
func serviceObject(autoTopology bool) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: serviceName, UID: "00000000-0000-4000-a000-000000000001",
			Labels:            map[string]string{"app": serviceName},
			CreationTimestamp: metav1.NewTime(epoch),
		},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": serviceName},
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http"),
			}},
		},
	}
	if autoTopology {
		svc.Annotations = map[string]string{endpointslice.AnnotationTopologyMode: "Auto"}
	}
	return svc
}

// podStage is where a Pod is in its life.
type podStage int

const (
	podPending     podStage = iota // scheduled, no IP yet: not an endpoint
	podStarting                    // running with an IP, not ready yet
	podReady                       // running and ready
	podUnready                     // running, readiness probe failing
	podTerminating                 // deletion requested, still ready: serving and terminating
	podStopping                    // deletion requested and no longer ready
)

// podRecord is a scenario's own view of one Pod; the Pod object is built from it on each
// change, so a 10,000-Pod scenario does not keep every version of every Pod around.
type podRecord struct {
	seq   int
	rev   int
	stage podStage
	// since is the last readiness transition, which both controllers read for the trigger time.
	since time.Time
	// deleted is when deletion was requested.
	deleted time.Time
}

func (r *podRecord) name() string { return fmt.Sprintf("web-r%d-%06d", r.rev, r.seq) }

func (r *podRecord) key() types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: r.name()}
}

// ip gives every Pod its own address in 10.0.0.0/8.
func (r *podRecord) ip() string {
	return fmt.Sprintf("10.%d.%d.%d", (r.seq>>16)&0xff, (r.seq>>8)&0xff, r.seq&0xff)
}

func (r *podRecord) object(nodes int) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Name: r.name(),
			UID:    types.UID(fmt.Sprintf("00000000-0000-4000-b000-%012d", r.seq)),
			Labels: map[string]string{"app": serviceName, "revision": fmt.Sprint(r.rev)},
		},
		Spec: corev1.PodSpec{
			NodeName: nodeName(r.seq % nodes),
			Containers: []corev1.Container{{
				Name: "app", Image: fmt.Sprintf("registry.example/web:%d", r.rev),
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if r.stage == podPending {
		return pod
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = r.ip()
	pod.Status.PodIPs = []corev1.PodIP{{IP: r.ip()}}
	ready := corev1.ConditionFalse
	if r.stage == podReady || r.stage == podTerminating {
		ready = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(r.since)}}
	if r.stage == podTerminating || r.stage == podStopping {
		pod.DeletionTimestamp = ptr.To(metav1.NewTime(r.deleted))
		pod.DeletionGracePeriodSeconds = ptr.To[int64](30)
	}
	return pod
}

func nodeKey(name string) types.NamespacedName { return types.NamespacedName{Name: name} }
