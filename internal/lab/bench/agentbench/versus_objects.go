package agentbench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// The EndpointSlice label values the bench writes; the EndpointSlice controller does not run on
// the bench's API server, so nothing else writes them.
const (
	sliceManager = "bench.fleetslice.io"
	// triggerTime is the annotation both programs' network_programming_duration starts from.
	triggerTime = "endpoints.kubernetes.io/last-change-trigger-time"
)

// kubeObjects spells one generated Service as the API objects a cluster would hold: the Service
// and one EndpointSlice of ready endpoints, those marked Local on the bench's Node and the others
// on another.
func kubeObjects(svc dataplane.Service, changed time.Time) (*corev1.Service, *discoveryv1.EndpointSlice) {
	port := svc.Ports[0]
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: svc.ClusterIPs[0].String(),
			Ports: []corev1.ServicePort{{Name: port.Name, Protocol: corev1.ProtocolTCP, Port: int32(port.Port),
				TargetPort: intstr.FromInt32(int32(port.Endpoints[0].Addr.Port())), NodePort: int32(port.NodePort)}},
		},
	}
	if port.NodePort != 0 {
		s.Spec.Type = corev1.ServiceTypeNodePort
		if port.ExternalLocal {
			s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
	}
	if svc.AffinityTimeout > 0 {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{
			TimeoutSeconds: ptr.To(int32(svc.AffinityTimeout / time.Second))}}
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name + "-bench",
			Labels:      map[string]string{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: sliceManager},
			Annotations: map[string]string{triggerTime: changed.UTC().Format(time.RFC3339Nano)}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(port.Name), Protocol: ptr.To(corev1.ProtocolTCP),
			Port: ptr.To(int32(port.Endpoints[0].Addr.Port()))}},
	}
	for _, ep := range port.Endpoints {
		node := otherNode
		if ep.Local {
			node = benchNode
		}
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ep.Addr.Addr().String()},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(node),
		})
	}
	return s, slice
}

// namespacesOf are the namespaces services live in, each once.
func namespacesOf(services []dataplane.Service) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range services {
		if !seen[s.Namespace] {
			seen[s.Namespace] = true
			out = append(out, s.Namespace)
		}
	}
	return out
}

// writeWorkers is how many writes the bench keeps in flight through the API (the NodePort
// Services, the 1% change): enough to keep the API server busy, few enough not to starve it on
// two cores.
const writeWorkers = 8

// parallel runs fn for 0..n-1 on writeWorkers goroutines and returns the first error.
func parallel(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	for range min(writeWorkers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

// populate creates the bench's Nodes, the namespaces and every Service with its slice: those with
// a NodePort through the API, the others seeded into etcd (versus_seed.go says why).
func populate(ctx context.Context, c client.Client, etcd *url.URL, services []dataplane.Service) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: benchNode}}
	if err := c.Create(ctx, node); err != nil {
		return fmt.Errorf("creating Node %s: %w", benchNode, err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: benchNodeIP}}
	if err := c.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("setting Node %s's address: %w", benchNode, err)
	}
	if err := c.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: otherNode}}); err != nil {
		return fmt.Errorf("creating Node %s: %w", otherNode, err)
	}
	for _, ns := range append(namespacesOf(services), addedNamespace) {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	now := time.Now()
	var viaAPI, seeded []dataplane.Service
	for _, svc := range services {
		if svc.Ports[0].NodePort != 0 {
			viaAPI = append(viaAPI, svc)
		} else {
			seeded = append(seeded, svc)
		}
	}
	if err := parallel(ctx, len(viaAPI), func(ctx context.Context, i int) error {
		return createService(ctx, c, viaAPI[i], now)
	}); err != nil {
		return err
	}
	if err := seedServices(ctx, etcd, seeded, now); err != nil {
		return err
	}
	return awaitListed(ctx, c, services)
}

func createService(ctx context.Context, c client.Client, svc dataplane.Service, now time.Time) error {
	s, slice := kubeObjects(svc, now)
	if err := c.Create(ctx, s); err != nil {
		return fmt.Errorf("creating Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if err := c.Create(ctx, slice); err != nil {
		return fmt.Errorf("creating EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	return nil
}

func deleteService(ctx context.Context, c client.Client, svc dataplane.Service) error {
	s, slice := kubeObjects(svc, time.Now())
	if err := c.Delete(ctx, slice); err != nil {
		return fmt.Errorf("deleting EndpointSlice %s/%s: %w", slice.Namespace, slice.Name, err)
	}
	if err := c.Delete(ctx, s); err != nil {
		return fmt.Errorf("deleting Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	return nil
}

// updateSlice rewrites a Service's EndpointSlice to svc's endpoints, stamped with now.
func updateSlice(ctx context.Context, c client.Client, svc dataplane.Service, now time.Time) error {
	_, want := kubeObjects(svc, now)
	var got discoveryv1.EndpointSlice
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
		return err
	}
	got.Endpoints, got.Annotations = want.Endpoints, want.Annotations
	if err := c.Update(ctx, &got); err != nil {
		return fmt.Errorf("updating EndpointSlice %s/%s: %w", got.Namespace, got.Name, err)
	}
	return nil
}
