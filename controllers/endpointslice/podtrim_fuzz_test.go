package endpointslice

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/controllers/multicluster/locality"
	"github.com/fleetslice/fleetslice/controllers/topology"
)

// fuzzBytes hands out the fuzzer's bytes, zeros once they run out.
type fuzzBytes []byte

func (b *fuzzBytes) next() byte {
	if len(*b) == 0 {
		return 0
	}
	v := (*b)[0]
	*b = (*b)[1:]
	return v
}

func (b *fuzzBytes) pick(options ...string) string { return options[int(b.next())%len(options)] }

// fuzzPod is a Pod with, by the bytes, every field an endpoint or a change decision reads set
// one way or another, and plenty that none reads.
func fuzzPod(b *fuzzBytes, i int) *corev1.Pod {
	f := b.next()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprint("web-", i%4), Namespace: b.pick("shop", "other"), UID: types.UID(fmt.Sprint("uid-", b.next()%3)),
			ResourceVersion: fmt.Sprint(b.next()), Generation: 4, CreationTimestamp: metav1.NewTime(time.Unix(int64(b.next()), 0)),
			Labels:          map[string]string{"app": b.pick("web", "api")},
			Annotations:     map[string]string{"kubectl.kubernetes.io/restartedAt": "now"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "rs"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{
			NodeName: b.pick("", "node-a", "node-b", "node-gone"), Hostname: b.pick("", "web-0"), Subdomain: b.pick("", "web", "api"),
			Volumes: []corev1.Volume{{Name: "data"}}, Tolerations: []corev1.Toleration{{Key: "k"}},
		},
		Status: corev1.PodStatus{
			Phase:             corev1.PodPhase(b.pick("", string(corev1.PodRunning), string(corev1.PodSucceeded), string(corev1.PodPending))),
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: int32(b.next())}},
			HostIP:            "192.0.2.1",
		},
	}
	if f&1 != 0 {
		p.DeletionTimestamp, p.DeletionGracePeriodSeconds = ptr.To(metav1.NewTime(time.Unix(9000, 0))), ptr.To[int64](30)
	}
	for c := range int(b.next() % 3) {
		p.Spec.Containers = append(p.Spec.Containers, fuzzContainer(b, c))
	}
	for c := range int(b.next() % 3) {
		ic := fuzzContainer(b, c+3)
		if b.next()&1 != 0 {
			ic.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, ic)
	}
	ips := []string{"10.0.0.1", "10.0.0.2", "fd00::1", "10.0.0.1"}
	switch f >> 1 & 3 {
	case 1:
		p.Status.PodIP = ips[int(b.next())%len(ips)]
		p.Status.PodIPs = []corev1.PodIP{{IP: p.Status.PodIP}}
	case 2:
		p.Status.PodIP = "10.0.0.3"
		p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.3"}, {IP: "fd00::3"}}
	case 3:
		p.Status.PodIPs = []corev1.PodIP{{IP: ips[int(b.next())%len(ips)]}}
	}
	for range int(b.next() % 4) {
		t := corev1.PodConditionType(b.pick(string(corev1.PodReady), string(corev1.PodScheduled), string(corev1.ContainersReady)))
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: t, Status: corev1.ConditionStatus(b.pick("True", "False", "Unknown")),
			LastTransitionTime: metav1.NewTime(time.Unix(int64(b.next())*10, 0)), LastProbeTime: metav1.NewTime(time.Unix(1, 0)),
			Reason: "Because", Message: "a long message nobody reads",
		})
	}
	return p
}

func fuzzContainer(b *fuzzBytes, i int) corev1.Container {
	c := corev1.Container{Name: fmt.Sprint("c", i), Image: "registry.k8s.io/app:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}
	for range int(b.next() % 3) {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: b.pick("http", "metrics", ""), ContainerPort: 8080 + int32(b.next()%3),
			Protocol: corev1.Protocol(b.pick("TCP", "UDP"))})
	}
	return c
}

// fuzzNode is a Node with, by the bytes, a zone, a role, readiness and CPU or not, and the
// images, addresses and annotations real Nodes carry.
func fuzzNode(b *fuzzBytes, name string) *corev1.Node {
	f := b.next()
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: fmt.Sprint(b.next()), UID: "node-uid",
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/arch": "amd64"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
			Images:    []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1 << 20}},
		},
	}
	if f&1 != 0 {
		n.Labels[corev1.LabelTopologyZone] = b.pick("zone-a", "zone-b", "")
	}
	if f&2 != 0 {
		n.Labels[b.pick(topology.LabelControlPlane, topology.LabelMasterRole)] = ""
	}
	for range int(f >> 2 % 3) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
			Type: corev1.NodeConditionType(b.pick(string(corev1.NodeReady), string(corev1.NodeMemoryPressure))), Status: corev1.ConditionStatus(b.pick("True", "False")),
			Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.NewTime(time.Unix(int64(b.next()), 0)),
		})
	}
	if f&16 != 0 {
		n.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(b.pick("0", "2", "1500m")), corev1.ResourceMemory: resource.MustParse("60Gi")}
	}
	return n
}

func fuzzServices(b *fuzzBytes) []*corev1.Service {
	named := service(func(s *corev1.Service) {})
	number := service(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(8080) })
	metrics := service(func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "m", Port: 9090, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromString("metrics")})
	})
	other := service(func(s *corev1.Service) {
		s.Spec.PublishNotReadyAddresses = b.next()&1 != 0
		s.Spec.ClusterIP = corev1.ClusterIPNone
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		s.CreationTimestamp = metav1.NewTime(time.Unix(int64(b.next()), 0))
	})
	return []*corev1.Service{named, number, metrics, other}
}

func trimAll[T any](t *testing.T, trim func(any) (any, error), in []T) []T {
	t.Helper()
	out := make([]T, len(in))
	for i, o := range in {
		got, err := trim(o)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := trim(got)
		if !reflect.DeepEqual(again, got) {
			t.Fatalf("trimming twice changed %T:\n%+v\n%+v", o, again, got)
		}
		out[i] = got.(T)
	}
	return out
}

// FuzzTrimKeepsEveryDecision: the manager decides the same from trimmed Pods and Nodes as from
// whole ones: every Service's endpoints (endpoints.Build, for named and numbered target ports,
// sidecar ports, headless, dual-stack and publishNotReadyAddresses Services), their trigger
// time, whether a Pod change or a Node change matters, the Pod's node index, the zones' CPU
// shares and the CPU a member publishes. Trimming twice changes nothing.
func FuzzTrimKeepsEveryDecision(f *testing.F) {
	f.Add([]byte{0x03, 1, 1, 2, 1, 1, 0, 1, 0x12, 0x51, 1, 0x17, 0xff, 0x33, 2, 0x10})
	f.Add([]byte{0x1e, 3, 0x42, 0x11, 1, 2, 2, 7, 0x81, 2, 3, 0x33, 0x02, 0x05, 0x44, 0x91, 0xa3})
	f.Add([]byte{0x0f, 2, 0x13, 0x37, 0x02, 2, 1, 2, 1, 0, 0x05, 0x1d, 0x02, 0x60, 1, 9, 3, 0x24})
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzBytes(data)
		var pods []*corev1.Pod
		for i := range int(b.next()%5) + 1 {
			pods = append(pods, fuzzPod(&b, i))
		}
		nodeList := []*corev1.Node{fuzzNode(&b, "node-a"), fuzzNode(&b, "node-b")}
		services := fuzzServices(&b)
		trimmedPods := trimAll(t, TrimPod, pods)
		trimmedNodes := trimAll(t, TrimNode, nodeList)
		nodes := map[string]*corev1.Node{"node-a": nodeList[0], "node-b": nodeList[1]}
		trimmedNodeMap := map[string]*corev1.Node{"node-a": trimmedNodes[0], "node-b": trimmedNodes[1]}
		for _, svc := range services {
			if got, want := endpoints.Build(svc, trimmedPods, trimmedNodeMap), endpoints.Build(svc, pods, nodes); !reflect.DeepEqual(got, want) {
				t.Fatalf("Service %s: trimmed objects build\n%+v\nwhole ones\n%+v", svc.Name, got, want)
			}
			prev := &endpoints.TriggerState{Pods: map[string]time.Time{"web-0": time.Unix(500, 0)}, Service: time.Unix(3, 0)}
			for _, p := range []*endpoints.TriggerState{nil, prev} {
				gotT, gotS := endpoints.LastChangeTriggerTime(p, svc, trimmedPods)
				wantT, wantS := endpoints.LastChangeTriggerTime(p, svc, pods)
				if !gotT.Equal(wantT) || !reflect.DeepEqual(gotS, wantS) {
					t.Fatalf("trigger time %v %v, want %v %v", gotT, gotS, wantT, wantS)
				}
			}
		}
		podIndex := FieldIndexes()[1].Extract
		for i := range pods {
			for j := range pods {
				if PodChangeMatters(trimmedPods[i], trimmedPods[j]) != PodChangeMatters(pods[i], pods[j]) {
					t.Fatalf("whether Pod %d becoming Pod %d matters differs", i, j)
				}
			}
			if PodChangeMatters(nil, trimmedPods[i]) != PodChangeMatters(nil, pods[i]) ||
				!reflect.DeepEqual(podIndex(trimmedPods[i]), podIndex(pods[i])) {
				t.Fatalf("Pod %d: creation or node index differs", i)
			}
		}
		if got, want := hints.ZonesOf(trimmedNodes), hints.ZonesOf(nodeList); !reflect.DeepEqual(got, want) {
			t.Fatalf("zones %+v, want %+v", got, want)
		}
		if got, want := locality.CPUFromNodes(trimmedNodes), locality.CPUFromNodes(nodeList); !reflect.DeepEqual(got, want) {
			t.Fatalf("published CPU %+v, want %+v", got, want)
		}
		a, c := nodeList[0], nodeList[1]
		ta, tc := trimmedNodes[0], trimmedNodes[1]
		if nodeShareChanged(ta, tc) != nodeShareChanged(a, c) || nodeReady(ta) != nodeReady(a) ||
			ta.Labels[corev1.LabelTopologyZone] != a.Labels[corev1.LabelTopologyZone] {
			t.Fatalf("a Node change is judged differently")
		}
	})
}
