package endpointslice_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

var zones = []string{"zone-a", "zone-b", "zone-c"}

func init() {
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(50 * time.Millisecond)
	SetDefaultConsistentlyDuration(time.Second)
}

// newNamespace creates a fresh namespace so specs never see each other's objects.
func newNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "eps-"}}
	Expect(k8sClient.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// ensureNodes creates one Node per zone (named node-<zone>) if missing.
func ensureNodes(ctx context.Context) {
	for _, z := range zones {
		node := builders.MakeNode("node-" + z).Zone(z).CPU("4").Obj()
		if err := k8sClient.Create(ctx, node); err != nil {
			Expect(client.IgnoreAlreadyExists(err)).To(Succeed())
		}
	}
}

type podSpec struct {
	name, node string
	ips        []string
	labels     map[string]string
	ready      bool
	ports      []corev1.ContainerPort
	hostname   string
	subdomain  string
}

// createPod creates a Pod and gives it the status kwok or a kubelet would: Running, IPs, Ready.
func createPod(ctx context.Context, ns string, p podSpec) *corev1.Pod {
	pod := builders.MakePod(ns, p.name).Labels(p.labels).Node(p.node).Hostname(p.hostname).Subdomain(p.subdomain)
	if p.ports == nil {
		pod.ContainerPort("http", 8080)
	} else {
		pod.ContainerPorts(p.ports...)
	}
	Expect(k8sClient.Create(ctx, pod.Obj())).To(Succeed())
	setPodStatus(ctx, pod.Obj(), p.ips, p.ready)
	return pod.Obj()
}

func setPodStatus(ctx context.Context, pod *corev1.Pod, ips []string, ready bool) {
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Phase = corev1.PodRunning
	pod.Status.PodIP = ips[0]
	pod.Status.PodIPs = nil
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.Now()}}
	Expect(k8sClient.Status().Update(ctx, pod)).To(Succeed())
}

func setReady(ctx context.Context, ns, name string, ready bool) {
	pod := &corev1.Pod{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
	ips := []string{}
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	setPodStatus(ctx, pod, ips, ready)
}

// createPods creates n ready Pods app=<app> named <app>-<from+i> spread over the zones, with IPs
// 10.<net>.<i/250>.<i%250+1>.
func createPods(ctx context.Context, ns, app string, net, from, n int) {
	for i := from; i < from+n; i++ {
		createPod(ctx, ns, podSpec{
			name:   fmt.Sprintf("%s-%d", app, i),
			node:   "node-" + zones[i%len(zones)],
			ips:    []string{fmt.Sprintf("10.%d.%d.%d", net, i/250, i%250+1)},
			labels: map[string]string{"app": app},
			ready:  true,
		})
	}
}

func deletePod(ctx context.Context, ns, name string) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(k8sClient.Delete(ctx, pod, client.GracePeriodSeconds(0))).To(Succeed())
}

// httpService is the Service every spec starts from: it selects app=<name> and sends port 80 to
// the Pods' port named http (createPod's default).
func httpService(ns, name string) *builders.ServiceWrapper {
	return builders.MakeService(ns, name).Selector("app", name).Port("http", 80, intstr.FromString("http"))
}

// create creates obj, a builder's output, after applying mutate, and returns it as the API
// server stored it.
func create[T client.Object](ctx context.Context, obj T, mutate ...func(T)) T {
	for _, m := range mutate {
		m(obj)
	}
	Expect(k8sClient.Create(ctx, obj)).To(Succeed())
	return obj
}

// ourSlices lists the slices fleetslice manages for a Service.
func ourSlices(ctx context.Context, g Gomega, ns, svc string) []discoveryv1.EndpointSlice {
	list := &discoveryv1.EndpointSliceList{}
	g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: endpointslice.ManagedBy,
	})).To(Succeed())
	return list.Items
}

// addressesOf returns every endpoint's first address across slices, sorted, duplicates kept.
func addressesOf(slices []discoveryv1.EndpointSlice) []string {
	var out []string
	for _, s := range slices {
		for _, ep := range s.Endpoints {
			out = append(out, ep.Addresses[0])
		}
	}
	sort.Strings(out)
	return out
}

// podIPs returns the IPs createPods gives Pods from..from+n-1, sorted like addressesOf.
func podIPs(net, from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, fmt.Sprintf("10.%d.%d.%d", net, i/250, i%250+1))
	}
	sort.Strings(out)
	return out
}

func endpointByAddress(slices []discoveryv1.EndpointSlice, addr string) *discoveryv1.Endpoint {
	for _, s := range slices {
		for i := range s.Endpoints {
			if s.Endpoints[i].Addresses[0] == addr {
				return &s.Endpoints[i]
			}
		}
	}
	return nil
}

// expectWellFormed checks the invariants every sync must keep: size cap, slice count bound.
func expectWellFormed(g Gomega, slices []discoveryv1.EndpointSlice, endpoints int) {
	for _, s := range slices {
		g.Expect(len(s.Endpoints)).To(BeNumerically("<=", maxPerSlice), "slice %s over the cap", s.Name)
	}
	bound := (endpoints+maxPerSlice-1)/maxPerSlice + 1 // compaction slack 1
	g.Expect(len(slices)).To(BeNumerically("<=", max(bound, 1)), "slice count for %d endpoints", endpoints)
}
