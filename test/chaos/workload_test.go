package chaos

import (
	"context"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/e2ebench"
)

const namespace = "chaos"

// The suite's workloads: "web" in the first member is rolled while faults strike; "api" in the
// second member is exported the other way; "steady" runs and is exported in both and must never
// be disturbed by any fault.
const (
	web           = "web"
	api           = "api"
	steadyService = "steady"
)

// exported are the Services each member exports.
func exported(member string) []string {
	if member == fleet[0].name {
		return []string{web, steadyService}
	}
	return append([]string{api, steadyService}, lateExports...)
}

func createWorkloads(ctx context.Context) error {
	for _, m := range fleet {
		if err := client.IgnoreAlreadyExists(m.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})); err != nil {
			return err
		}
		pods := map[string]int{web: size.RolloutPods, api: size.OtherPods, steadyService: size.SteadyPods}
		for _, name := range exported(m.name) {
			if err := createExported(ctx, m.client, name, pods[name]); err != nil {
				return fmt.Errorf("%s in %s: %w", name, m.name, err)
			}
		}
	}
	return nil
}

// createExported creates a Deployment, its Service and the ServiceExport.
func createExported(ctx context.Context, c client.Client, name string, pods int) error {
	deploy := deployment(name, pods)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: deploy.Spec.Selector.MatchLabels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	for _, obj := range []client.Object{svc, export, deploy} {
		if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
	}
	return nil
}

func deployment(name string, replicas int) *appsv1.Deployment {
	return e2ebench.RollingDeployment(namespace, name, int32(replicas))
}

// rollOut changes the Deployment's template, which replaces every Pod 25% at a time.
func rollOut(ctx context.Context, m *member, name string) error {
	d := &appsv1.Deployment{}
	if err := m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, d); err != nil {
		return err
	}
	patch := client.MergeFrom(d.DeepCopy())
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	n, _ := strconv.Atoi(d.Spec.Template.Annotations["chaos.fleetslice.io/rollout"])
	d.Spec.Template.Annotations["chaos.fleetslice.io/rollout"] = strconv.Itoa(n + 1)
	return m.client.Patch(ctx, d, patch)
}

// rolledOut reports whether every Deployment of the member runs its current template only, with
// every Pod available.
func rolledOut(ctx context.Context, m *member) error {
	list := &appsv1.DeploymentList{}
	if err := m.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return err
	}
	for _, d := range list.Items {
		want := ptr.Deref(d.Spec.Replicas, 1)
		s := d.Status
		if s.ObservedGeneration < d.Generation || s.UpdatedReplicas != want || s.Replicas != want || s.AvailableReplicas != want {
			return fmt.Errorf("deployment %s in %s is rolling out: %d updated, %d in all, %d available of %d",
				d.Name, m.name, s.UpdatedReplicas, s.Replicas, s.AvailableReplicas, want)
		}
	}
	return nil
}
