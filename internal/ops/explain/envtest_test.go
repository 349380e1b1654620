package explain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice/hints"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
)

// TestExplainLiveService runs explain against a real API server: the objects go through
// defaulting and validation and are read back the way `kubectl fleetslice explain` reads them,
// so a field the gatherer misses or a selector it gets wrong shows here, not in a user's cluster.
func TestExplainLiveService(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an API server")
	}
	c := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, ns := range []string{"shop", "fleetslice-system"} {
		mustCreate(ctx, t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	// The manager's Deployment as dist/install.yaml lays it out, with two flags changed.
	mustCreate(ctx, t, c, managerDeployment("--leader-elect", "--max-endpoints-per-slice=50", "--topology-overload-threshold", "0.25"))

	// zone-a has 8 of 12 CPU and a third of the endpoints: with own-zone hints its endpoints
	// would carry twice their fair share, so the allocator must hint 5 endpoints for it.
	nodes, pods := threeZones([3]string{"8", "2", "2"}, 3)
	svc := testService(map[string]string{hints.AnnotationTopologyMode: "Auto"})
	svc.Spec.ClusterIP = "" // the API server allocates one from its own range
	mustCreate(ctx, t, c, svc)
	createWithStatus(ctx, t, c, nodes, pods)
	for _, s := range layout(svc, pods, nodes, 100, ownZone) {
		mustCreate(ctx, t, c, s)
	}

	settings := DiscoverSettings(ctx, c)
	in, err := GatherService(ctx, c, "shop", "web", settings)
	if err != nil {
		t.Fatal(err)
	}
	rep := ExplainService(in)
	var out strings.Builder
	if err := rep.Render(&out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	for _, want := range []string{
		"50 endpoints per slice", "from Deployment fleetslice-system/fleetslice-controller-manager",
		"spec.selector app=web selects 9 of the namespace's 9 Pods", "zone-a  8000m             66.7%",
		"zone-a  5        5        3", "In the cluster: DIFFERS", "is hinted for zone-b, decided zone-a",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("explain lacks %q", want)
		}
	}

	// Writing what the plan asks for, as the controller's next sync would, must leave nothing to
	// explain away.
	for _, set := range rep.Sets {
		for _, u := range set.Plan.Update {
			if err := c.Update(ctx, u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if in, err = GatherService(ctx, c, "shop", "web", settings); err != nil {
		t.Fatal(err)
	}
	if again := ExplainService(in); len(again.Differences) > 0 {
		t.Errorf("after the planned writes explain still finds %q", again.Differences)
	}

	if _, err := GatherService(ctx, c, "shop", "nope", settings); err == nil || err.Error() != "Service shop/nope not found" {
		t.Errorf("an unknown Service gives %v", err)
	}
	_, err = GatherImport(ctx, c, nil, nil, "shop", "web", settings, time.Now())
	if err == nil || !strings.Contains(err.Error(), "ServiceImport shop/web not found") {
		t.Errorf("a missing import gives %v", err)
	}
}

func startControlPlane(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, mcsv1beta1.Install} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	// testenv gives the control plane the time a loaded CI machine needs to start it.
	property, err := crds.ClusterProperty()
	if err != nil {
		t.Fatal(err)
	}
	cluster, err := testenv.StartWith("explain", property...)
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	cfg := cluster.Config
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// createWithStatus creates the Nodes and Pods and then writes their status, which a create
// drops; the Pods' UIDs are the server's afterwards, so slices laid out from them match.
func createWithStatus(ctx context.Context, t *testing.T, c client.Client, nodes []*corev1.Node, pods []*corev1.Pod) {
	t.Helper()
	objs := make([]client.Object, 0, len(nodes)+len(pods))
	for _, n := range nodes {
		objs = append(objs, n)
	}
	for _, p := range pods {
		p.Spec.Containers = []corev1.Container{{Name: "web", Image: "web"}}
		objs = append(objs, p)
	}
	for _, o := range objs {
		withStatus := o.DeepCopyObject().(client.Object)
		mustCreate(ctx, t, c, o)
		withStatus.SetResourceVersion(o.GetResourceVersion())
		withStatus.SetUID(o.GetUID())
		if err := c.Status().Update(ctx, withStatus); err != nil {
			t.Fatal(err)
		}
		// Keep the caller's object as the server has it now.
		switch obj := o.(type) {
		case *corev1.Node:
			*obj = *withStatus.(*corev1.Node)
		case *corev1.Pod:
			*obj = *withStatus.(*corev1.Pod)
		}
	}
}

func mustCreate(ctx context.Context, t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(ctx, obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func managerDeployment(args ...string) *appsv1.Deployment {
	labels := map[string]string{"control-plane": "controller-manager"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleetslice-system", Name: "fleetslice-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "manager", Image: fmt.Sprintf("manager:%s", "test"), Command: []string{"/manager"}, Args: args,
				}}},
			},
		},
	}
}
