package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
)

// TestAgainstAPIServer runs the commands as a user does, through a kubeconfig, against a real
// API server: the scheme, the flags and the error paths of the plugin itself, which the
// explain package's own tests do not reach.
func TestAgainstAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	// testenv gives the control plane the time a loaded CI machine needs to start it.
	property, err := crds.ClusterProperty()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := testenv.StartWith("plugin", property...)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	defer func() { _ = cluster.Stop() }()
	cfg := cluster.Config
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	seed(ctx, t, c)

	out, err := run(t, "explain", "service", "--kubeconfig", kubeconfig, "-n", "shop", "web")
	if err != nil {
		t.Fatalf("explain service: %v", err)
	}
	t.Log("\n" + out)
	for _, want := range []string{"Service shop/web", "the manager's defaults: no Deployment", "selects 0 of the namespace's 0 Pods",
		"no IPv4 endpoints and no placeholder slice; the next sync creates one"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain service lacks %q", want)
		}
	}
	if _, err := run(t, "explain", "import", "--kubeconfig", kubeconfig, "-n", "shop", "web"); err == nil ||
		!strings.Contains(err.Error(), "ServiceImport shop/web not found") {
		t.Errorf("explain import of a Service nobody exports: %v", err)
	}
	if out, err = run(t, "status", "--kubeconfig", kubeconfig); err != nil || !strings.Contains(out, "zone-a") {
		t.Errorf("status: %v\n%s", err, out)
	}
}

func seed(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		node,
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}, Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, node); err != nil {
		t.Fatal(err)
	}
}
