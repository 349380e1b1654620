package endpointslice

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/endpoints"
)

// fullPod has every field the endpoints could depend on set, next to plenty that they do not.
func fullPod(name, ip string, ready bool, mutate func(*corev1.Pod)) *corev1.Pod {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "42",
			CreationTimestamp: metav1.NewTime(time.Unix(1000, 0)),
			Labels:            map[string]string{"app": "web"},
			Annotations:       map[string]string{"big": string(make([]byte, 1024))},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-a", Hostname: "web-0", Subdomain: "web",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/app:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}},
			InitContainers: []corev1.Container{{
				Name: "proxy", Image: "registry.k8s.io/proxy:1", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
			}},
			Volumes:     []corev1.Volume{{Name: "data"}},
			Tolerations: []corev1.Toleration{{Key: "k"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(time.Unix(2000, 0)),
			}},
			PodIP:             ip,
			PodIPs:            []corev1.PodIP{{IP: ip}, {IP: "fd00::" + ip[len(ip)-1:]}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: ready, RestartCount: 3}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// compacted returns what the manager's cache keeps of pods, as the reconciler reads it.
func compacted(t *testing.T, pods []*corev1.Pod) []*endpoints.Pod {
	t.Helper()
	out := make([]*endpoints.Pod, len(pods))
	for i, p := range pods {
		obj, err := CompactPod(p.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &obj.(*CachedPod).Pod
	}
	return out
}

// TestCachedPodsBuildTheSameEndpoints is the property the cache transform must keep: whatever
// the Service, endpoints built from cached Pods equal those built from the whole ones.
func TestCachedPodsBuildTheSameEndpoints(t *testing.T) {
	pods := []*corev1.Pod{
		fullPod("ready", "10.0.0.1", true, nil),
		fullPod("not-ready", "10.0.0.2", false, nil),
		fullPod("terminating", "10.0.0.3", true, func(p *corev1.Pod) {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(time.Unix(3000, 0)))
			p.DeletionGracePeriodSeconds = ptr.To[int64](30)
		}),
		fullPod("succeeded", "10.0.0.4", false, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		fullPod("no-ip", "10.0.0.5", true, func(p *corev1.Pod) { p.Status.PodIP, p.Status.PodIPs = "", nil }),
		fullPod("other-node", "10.0.0.6", true, func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }),
	}
	nodes := map[string]*corev1.Node{
		"node-a": {ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "a"}}},
	}
	services := map[string]*corev1.Service{
		"named target port":   service(func(s *corev1.Service) {}),
		"sidecar port":        service(func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromString("metrics") }),
		"publishNotReady":     service(func(s *corev1.Service) { s.Spec.PublishNotReadyAddresses = true }),
		"headless, hostnames": service(func(s *corev1.Service) { s.Spec.ClusterIP = corev1.ClusterIPNone }),
		"dual-stack": service(func(s *corev1.Service) {
			s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
		}),
	}
	for name, svc := range services {
		t.Run(name, func(t *testing.T) {
			for _, p := range pods {
				if got, want := endpoints.Build(svc, compacted(t, []*corev1.Pod{p}), nodes), wholePodResult(svc, p, nodes); !reflect.DeepEqual(got, want) {
					t.Fatalf("Pod %s: the cached Pod builds\n%+v\nthe whole Pod\n%+v", p.Name, got, want)
				}
			}
			if got, want := endpoints.Build(svc, compacted(t, pods), nodes), endpoints.Build(svc, endpoints.PodsOf(pods), nodes); !reflect.DeepEqual(got, want) {
				t.Fatalf("cached Pods build\n%+v\nwhole Pods\n%+v", got, want)
			}
		})
	}
}

func service(mutate func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"}, IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromString("http")}},
		},
	}
	mutate(s)
	return s
}

func TestCompactPodIsAClientObjectOfWhatDecisionsRead(t *testing.T) {
	full := fullPod("web-0", "10.0.0.1", true, nil)
	obj, err := CompactPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	pod, ok := obj.(*CachedPod)
	if !ok {
		t.Fatalf("CompactPod made a %T", obj)
	}
	var _ client.Object = pod
	if again, _ := CompactPod(pod); again != obj {
		t.Fatalf("a CachedPod was transformed again")
	}
	want := endpoints.Pod{Namespace: "shop", Name: "web-0", UID: "uid-web-0",
		NodeName: "node-a", Hostname: "web-0", Subdomain: "web", IPs: []string{"10.0.0.1", "fd00::1"},
		Ports:           []endpoints.Port{{Name: "http", Protocol: corev1.ProtocolTCP, Number: 8080}, {Name: "metrics", Protocol: corev1.ProtocolTCP, Number: 9090}},
		ReadyTransition: time.Unix(2000, 0), Ready: true, Candidate: true}
	if !reflect.DeepEqual(pod.Pod, want) || pod.ResourceVersion != "42" || pod.DeletionTimestamp != nil ||
		!reflect.DeepEqual(pod.GetLabels(), map[string]string{"app": "web"}) || pod.Labels().Get("app") != "web" {
		t.Fatalf("cached\n%+v\nwant\n%+v", pod.Pod, want)
	}
	if key, err := cache.MetaNamespaceKeyFunc(pod); err != nil || key != "shop/web-0" {
		t.Fatalf("key %q, %v", key, err)
	}
	if ns, err := cache.MetaNamespaceIndexFunc(pod); err != nil || !reflect.DeepEqual(ns, []string{"shop"}) {
		t.Fatalf("namespace index %v, %v", ns, err)
	}
	if gvk := pod.GetObjectKind().GroupVersionKind(); gvk != corev1.SchemeGroupVersion.WithKind("Pod") {
		t.Fatalf("kind %v", gvk)
	}
	cp := pod.DeepCopyObject().(*CachedPod)
	cp.SetLabels(map[string]string{"app": "other"})
	cp.IPs[0], cp.Ports[0].Number = "10.9.9.9", 1
	cp.SetDeletionTimestamp(ptr.To(metav1.Now()))
	if !reflect.DeepEqual(pod.Pod, want) || pod.Labels().Get("app") != "web" || !cp.Terminating || cp.Labels().Get("app") != "other" {
		t.Fatalf("a deep copy shares or misses state: %+v", cp)
	}

	for _, change := range []func(*corev1.Pod){
		func(p *corev1.Pod) { p.Labels = map[string]string{"app": "other"} },
		func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse },
		func(p *corev1.Pod) { p.Spec.Containers[0].Ports[0].ContainerPort = 8081 },
		func(p *corev1.Pod) { p.Spec.Hostname = "web-1" },
		func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) },
		func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
		func(p *corev1.Pod) { p.UID = "recreated" },
	} {
		changed := full.DeepCopy()
		change(changed)
		after, _ := CompactPod(changed)
		if !PodChangeMatters(pod, after.(*CachedPod)) {
			t.Errorf("a change that moves an endpoint does not matter: %+v", after)
		}
	}
	changed := full.DeepCopy()
	changed.Status.ContainerStatuses[0].RestartCount++
	changed.Annotations = nil
	if after, _ := CompactPod(changed); PodChangeMatters(pod, after.(*CachedPod)) {
		t.Errorf("a restart count matters")
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/web-0", Obj: pod}
	if got, err := CompactPod(tombstone); err != nil || !reflect.DeepEqual(got, tombstone) {
		t.Fatalf("a tombstone was changed: %v, %v", got, err)
	}
}
