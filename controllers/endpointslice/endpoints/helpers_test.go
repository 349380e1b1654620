package endpoints

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

const testNamespace = "shop"

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func service(mutate ...func(*corev1.Service)) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: testNamespace, UID: "svc-uid",
			CreationTimestamp: metav1.NewTime(epoch),
		},
		Spec: corev1.ServiceSpec{
			Selector:   map[string]string{"app": "web"},
			ClusterIP:  "10.96.0.10",
			IPFamilies: []corev1.IPFamily{corev1.IPv4Protocol},
			Ports: []corev1.ServicePort{{
				Name: "http", Port: 80, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	for _, m := range mutate {
		m(svc)
	}
	return svc
}

func headless(svc *corev1.Service) { svc.Spec.ClusterIP = corev1.ClusterIPNone }

func families(fs ...corev1.IPFamily) func(*corev1.Service) {
	return func(svc *corev1.Service) { svc.Spec.IPFamilies = fs }
}

func servicePorts(ports ...corev1.ServicePort) func(*corev1.Service) {
	return func(svc *corev1.Service) { svc.Spec.Ports = ports }
}

// pod returns a Running, Ready Pod on node-a with the given IPs.
func pod(name string, ips ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: testNamespace, UID: types.UID(name + "-uid"),
			Labels: map[string]string{"app": "web"},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-a",
			Containers: []corev1.Container{{
				Name:  "app",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{
				Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(epoch.Add(time.Minute)),
			}},
		},
	}
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return p
}

func notReady(p *corev1.Pod) *corev1.Pod {
	p.Status.Conditions[0].Status = corev1.ConditionFalse
	return p
}

func terminating(p *corev1.Pod) *corev1.Pod {
	p.DeletionTimestamp = ptr.To(metav1.NewTime(epoch.Add(time.Hour)))
	return p
}

func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeName = node
	return p
}

func withContainerPort(p *corev1.Pod, name string, number int32) *corev1.Pod {
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: name, ContainerPort: number, Protocol: corev1.ProtocolTCP}}
	return p
}

func defaultNodes() map[string]*corev1.Node {
	return map[string]*corev1.Node{
		"node-a": builders.MakeNode("node-a").Zone("zone-a").Obj(),
		"node-b": builders.MakeNode("node-b").Zone("zone-b").Obj(),
		"node-c": builders.MakeNode("node-c").Obj(),
	}
}

func port(name string, number int32) discoveryv1.EndpointPort {
	return discoveryv1.EndpointPort{Name: ptr.To(name), Port: ptr.To(number), Protocol: ptr.To(corev1.ProtocolTCP)}
}

// addressesOf returns each set's endpoints' addresses, by Key.
func addressesOf(sets []Set) map[string][]string {
	out := map[string][]string{}
	for _, s := range sets {
		for _, ep := range s.Endpoints {
			// An endpoint of several addresses reads "first+second".
			out[s.Key] = append(out[s.Key], strings.Join(ep.Addresses, "+"))
		}
	}
	return out
}
