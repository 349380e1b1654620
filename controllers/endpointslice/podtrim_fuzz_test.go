package endpointslice

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/utils/net"
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
	if f&8 != 0 {
		p.Labels[b.pick("tier", "app.kubernetes.io/name", "z")] = b.pick("", "front", "web")
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

// wholePodResult is what endpoints.Build makes of one Pod, read straight off the whole Pod: the
// fuzz test's reference for what the cached form (CachedPod, endpoints.PodOf) must keep.
func wholePodResult(svc *corev1.Service, pod *corev1.Pod, nodes map[string]*corev1.Node) endpoints.Result {
	res := endpoints.Result{Sets: []endpoints.Set{}}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed ||
		(pod.Status.PodIP == "" && len(pod.Status.PodIPs) == 0) {
		return res
	}
	node := nodes[pod.Spec.NodeName]
	if node == nil && !svc.Spec.PublishNotReadyAddresses {
		res.PodsOnUnknownNodes = []string{pod.Namespace + "/" + pod.Name}
		return res
	}
	ports := []discoveryv1.EndpointPort{}
	for _, sp := range svc.Spec.Ports {
		if number, ok := wholePodPort(pod, sp); ok {
			ports = append(ports, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Port: ptr.To(number), Protocol: ptr.To(sp.Protocol), AppProtocol: sp.AppProtocol})
		}
	}
	ports = endpoints.SortPorts(ports)
	serving := false
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			serving = c.Status == corev1.ConditionTrue
			break
		}
	}
	terminating := pod.DeletionTimestamp != nil
	ready := svc.Spec.PublishNotReadyAddresses || (serving && !terminating)
	for _, family := range endpoints.AddressTypes(svc) {
		var addresses []string
		for _, ip := range pod.Status.PodIPs {
			parsed := utilnet.ParseIPSloppy(ip.IP)
			if parsed != nil && utilnet.IsIPv6(parsed) == (family == discoveryv1.AddressTypeIPv6) {
				addresses = append(addresses, parsed.String())
			}
		}
		if len(addresses) == 0 {
			continue
		}
		ep := discoveryv1.Endpoint{Addresses: addresses,
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready), Serving: ptr.To(serving), Terminating: ptr.To(terminating)},
			TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if pod.Spec.NodeName != "" {
			ep.NodeName = ptr.To(pod.Spec.NodeName)
		}
		if zone := nodeZone(node); zone != "" {
			ep.Zone = ptr.To(zone)
		}
		if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
			ep.Hostname = ptr.To(pod.Spec.Hostname)
		}
		res.Sets = append(res.Sets, endpoints.Set{Key: endpoints.KeyOf(family, ports), AddressType: family, Ports: ports,
			Endpoints: []discoveryv1.Endpoint{ep}})
	}
	slices.SortFunc(res.Sets, func(a, b endpoints.Set) int { return strings.Compare(a.Key, b.Key) })
	return res
}

func nodeZone(node *corev1.Node) string {
	if node == nil {
		return ""
	}
	return node.Labels[corev1.LabelTopologyZone]
}

// wholePodPort is the number a Service port's target resolves to on the whole Pod: a number as
// it is, a name by the first container port of that name and protocol, then the first of a
// sidecar's (an init container that keeps running).
func wholePodPort(pod *corev1.Pod, sp corev1.ServicePort) (int32, bool) {
	if sp.TargetPort.Type == intstr.Int {
		return sp.TargetPort.IntVal, true
	}
	var containers []corev1.Container
	containers = append(containers, pod.Spec.Containers...)
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			containers = append(containers, c)
		}
	}
	for _, c := range containers {
		for _, cp := range c.Ports {
			if cp.Name == sp.TargetPort.StrVal && cp.Protocol == sp.Protocol {
				return cp.ContainerPort, true
			}
		}
	}
	return 0, false
}

// wholePodTriggers is each Pod's trigger time read off the whole Pod: its Ready condition's
// last transition, when it has one.
func wholePodTriggers(pods []*corev1.Pod) map[string]time.Time {
	out := map[string]time.Time{}
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady {
				if !c.LastTransitionTime.IsZero() {
					out[p.Name] = c.LastTransitionTime.Time
				}
				break
			}
		}
	}
	return out
}

// cachedPods returns what the manager's cache keeps of pods (CompactPod), checking that the
// transform is idempotent and keeps the metadata the informer reads.
func cachedPods(t *testing.T, pods []*corev1.Pod) []*CachedPod {
	t.Helper()
	out := make([]*CachedPod, len(pods))
	for i, p := range pods {
		obj, err := CompactPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		c := obj.(*CachedPod)
		if again, _ := CompactPod(c); again != obj {
			t.Fatalf("CompactPod changed a CachedPod")
		}
		if c.GetNamespace() != p.Namespace || c.GetName() != p.Name || c.GetUID() != p.UID ||
			c.GetResourceVersion() != p.ResourceVersion || !maps.Equal(c.GetLabels(), p.Labels) ||
			!reflect.DeepEqual(c.GetDeletionTimestamp(), p.DeletionTimestamp) {
			t.Fatalf("the cached Pod's metadata differs: %+v", c)
		}
		out[i] = c
	}
	return out
}

// FuzzTrimKeepsEveryDecision: the manager decides the same from what its cache keeps, CachedPods
// and trimmed Nodes, as from whole objects: every Service's endpoints (endpoints.Build, for named
// and numbered target ports, sidecar ports, headless, dual-stack and publishNotReadyAddresses
// Services) against a reference read off each whole Pod, their trigger times, whether a Pod is
// worth a sync on creation, the Pod's node index, the zones' CPU shares and the CPU a member
// publishes, whether a Node change matters and which selectors match the Pod. A Pod update that PodChangeMatters skips changes
// no Service's endpoints and no selection. Transforming twice changes nothing.
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
		cached := cachedPods(t, pods)
		views := make([]*endpoints.Pod, len(cached))
		for i, c := range cached {
			views[i] = &c.Pod
		}
		trimmedNodes := trimAll(t, TrimNode, nodeList)
		nodes := map[string]*corev1.Node{"node-a": nodeList[0], "node-b": nodeList[1]}
		trimmedNodeMap := map[string]*corev1.Node{"node-a": trimmedNodes[0], "node-b": trimmedNodes[1]}
		for _, svc := range services {
			for i, p := range pods {
				if got, want := endpoints.Build(svc, views[i:i+1], trimmedNodeMap), wholePodResult(svc, p, nodes); !reflect.DeepEqual(got, want) {
					t.Fatalf("Service %s, Pod %d: the cached Pod builds\n%+v\nthe whole one\n%+v", svc.Name, i, got, want)
				}
			}
			if got, want := endpoints.Build(svc, views, trimmedNodeMap), endpoints.Build(svc, endpoints.PodsOf(pods), nodes); !reflect.DeepEqual(got, want) {
				t.Fatalf("Service %s: cached objects build\n%+v\nwhole ones\n%+v", svc.Name, got, want)
			}
			prev := &endpoints.TriggerState{Pods: map[string]time.Time{"web-0": time.Unix(500, 0)}, Service: time.Unix(3, 0)}
			for _, p := range []*endpoints.TriggerState{nil, prev} {
				gotT, gotS := endpoints.LastChangeTriggerTime(p, svc, views)
				wantT, wantS := endpoints.LastChangeTriggerTime(p, svc, endpoints.PodsOf(pods))
				if !gotT.Equal(wantT) || !reflect.DeepEqual(gotS, wantS) {
					t.Fatalf("trigger time %v %v, want %v %v", gotT, gotS, wantT, wantS)
				}
				if want := wholePodTriggers(pods); !maps.EqualFunc(gotS.Pods, want, time.Time.Equal) {
					t.Fatalf("the Pods' trigger times %v, want %v", gotS.Pods, want)
				}
			}
		}
		selectors := []labels.Selector{labels.Everything(), labels.Nothing()}
		for _, svc := range services {
			selectors = append(selectors, labels.SelectorFromSet(svc.Spec.Selector))
		}
		for _, expr := range []string{"app in (web, api), tier notin (front)", "!z", "app.kubernetes.io/name", "z=", "tier!=web"} {
			sel, err := labels.Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			selectors = append(selectors, sel)
		}
		podIndex := FieldIndexes()[1].Extract
		for i, p := range pods {
			for _, sel := range selectors {
				if sel.Matches(cached[i].Labels()) != sel.Matches(labels.Set(p.Labels)) {
					t.Fatalf("Pod %d: selector %q matches the cached labels %v otherwise than %v", i, sel, cached[i].GetLabels(), p.Labels)
				}
			}
			candidate := p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed &&
				(p.Status.PodIP != "" || len(p.Status.PodIPs) > 0)
			if PodChangeMatters(nil, cached[i]) != candidate || PodChangeMatters(cached[i], nil) != candidate ||
				!reflect.DeepEqual(podIndex(cached[i]), podIndex(p)) {
				t.Fatalf("Pod %d: creation, deletion or node index differs", i)
			}
			// Every other Pod as an update of this one: when the update does not matter, no
			// Service's endpoints or selection of the Pod may differ.
			for j := range pods {
				updated := pods[j].DeepCopy()
				updated.ObjectMeta = *p.ObjectMeta.DeepCopy()
				updated.Labels = pods[j].Labels
				updated.DeletionTimestamp = pods[j].DeletionTimestamp
				after := cachedPods(t, []*corev1.Pod{updated})[0]
				if PodChangeMatters(cached[i], after) {
					continue
				}
				// A Pod that is no endpoint before or after is in no Service's slices, whatever
				// its labels.
				if (cached[i].Candidate || after.Candidate) && !maps.Equal(p.Labels, updated.Labels) {
					t.Fatalf("Pod %d relabelled as Pod %d does not matter", i, j)
				}
				for _, svc := range services {
					if !reflect.DeepEqual(wholePodResult(svc, p, nodes), wholePodResult(svc, updated, nodes)) {
						t.Fatalf("Pod %d updated as Pod %d changes Service %s's endpoints, yet does not matter", i, j, svc.Name)
					}
				}
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
