package agentbench

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestPopulateSeedsWhatACreateWouldLeave populates a real API server the way the side-by-side
// part does and reads back what the programs will see: every Service with its cluster IP and
// slice, the seeded cluster IPs allocated (a second Service asking for one is refused), and the
// NodePort Services created through the API with their ports.
func TestPopulateSeedsWhatACreateWouldLeave(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	api, c, kubeconfig, err := startAPIServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := errors.Join(api.Stop(), os.RemoveAll(filepath.Dir(kubeconfig))); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	services := buildServices(120, 3)
	for i := range services {
		services[i].ClusterIPs = []netip.Addr{addrIn(10, 96, clusterIPOffset+i)}
	}
	if err := populate(ctx, c, api.ControlPlane.Etcd.URL, services); err != nil {
		t.Fatal(err)
	}
	for _, svc := range services {
		var got corev1.Service
		if err := c.Get(ctx, client.ObjectKey{Namespace: svc.Namespace, Name: svc.Name}, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.ClusterIP != svc.ClusterIPs[0].String() || got.Spec.Ports[0].NodePort != int32(svc.Ports[0].NodePort) {
			t.Errorf("%s/%s: cluster IP %s, NodePort %d; want %s, %d", svc.Namespace, svc.Name, got.Spec.ClusterIP,
				got.Spec.Ports[0].NodePort, svc.ClusterIPs[0], svc.Ports[0].NodePort)
		}
		if (svc.AffinityTimeout > 0) != (got.Spec.SessionAffinity == corev1.ServiceAffinityClientIP) {
			t.Errorf("%s/%s: session affinity %q", svc.Namespace, svc.Name, got.Spec.SessionAffinity)
		}
		var slices discoveryv1.EndpointSliceList
		if err := c.List(ctx, &slices, client.InNamespace(svc.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			t.Fatal(err)
		}
		if len(slices.Items) != 1 || len(slices.Items[0].Endpoints) != len(svc.Ports[0].Endpoints) {
			t.Errorf("%s/%s: slices %+v", svc.Namespace, svc.Name, slices.Items)
		}
		var ip networkingv1.IPAddress
		if err := c.Get(ctx, client.ObjectKey{Name: svc.ClusterIPs[0].String()}, &ip); err != nil {
			t.Errorf("%s/%s: the IPAddress of its cluster IP: %v", svc.Namespace, svc.Name, err)
		}
	}
	// A seeded cluster IP is taken: the allocator refuses it to another Service.
	taken := services[1]
	if taken.Ports[0].NodePort != 0 {
		t.Fatalf("want a seeded Service, %s has a NodePort", taken.Name)
	}
	dup := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: addedNamespace, Name: "wants-a-taken-ip"},
		Spec: corev1.ServiceSpec{ClusterIP: taken.ClusterIPs[0].String(),
			Ports: []corev1.ServicePort{{Port: 80, Protocol: corev1.ProtocolTCP}}},
	}
	if err := c.Create(ctx, dup); !apierrors.IsInvalid(err) {
		t.Errorf("creating a Service on seeded cluster IP %s: got %v, want it refused as allocated", taken.ClusterIPs[0], err)
	}
}
