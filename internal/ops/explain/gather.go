package explain

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// managerLabel marks the manager's Deployment in config/manager and the Helm chart.
var managerLabel = client.MatchingLabels{"control-plane": "controller-manager"}

// DiscoverSettings reads the manager's flags from its Deployment. Without one (another install
// method, or no permission to list Deployments) it falls back to the defaults and says so,
// since the flags may then differ from what the manager runs with.
func DiscoverSettings(ctx context.Context, c client.Reader) Settings {
	list := &appsv1.DeploymentList{}
	if err := c.List(ctx, list, managerLabel); err != nil {
		s := DefaultSettings()
		s.Source = fmt.Sprintf("the manager's defaults: its Deployment could not be read: %v", err)
		return s
	}
	for i := range list.Items {
		d := &list.Items[i]
		args, ok := ManagerContainer(d)
		if !ok {
			continue
		}
		s, problems := SettingsFromArgs(args, fmt.Sprintf("from Deployment %s/%s", d.Namespace, d.Name))
		for _, p := range problems {
			s.Source += "; ignored " + p
		}
		if len(list.Items) > 1 {
			s.Source += fmt.Sprintf("; %d manager Deployments found, the first is used", len(list.Items))
		}
		return s
	}
	s := DefaultSettings()
	s.Source = "the manager's defaults: no Deployment labelled control-plane=controller-manager runs /manager"
	return s
}

// GatherService reads what the EndpointSlice controller reads for one Service.
func GatherService(ctx context.Context, c client.Reader, namespace, name string, settings Settings) (ServiceInputs, error) {
	in := ServiceInputs{Service: &corev1.Service{}, Settings: settings}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, in.Service); err != nil {
		if apierrors.IsNotFound(err) {
			return in, fmt.Errorf("Service %s/%s not found", namespace, name)
		}
		return in, fmt.Errorf("reading Service %s/%s: %w", namespace, name, err)
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return in, fmt.Errorf("listing Pods in %s: %w", namespace, err)
	}
	for i := range pods.Items {
		in.Pods = append(in.Pods, &pods.Items[i])
	}
	nodes := &corev1.NodeList{}
	if err := c.List(ctx, nodes); err != nil {
		return in, fmt.Errorf("listing Nodes (zones and CPU decide the hints): %w", err)
	}
	for i := range nodes.Items {
		in.Nodes = append(in.Nodes, &nodes.Items[i])
	}
	slices := &discoveryv1.EndpointSliceList{}
	if err := c.List(ctx, slices, client.InNamespace(namespace), client.MatchingLabels{discoveryv1.LabelServiceName: name}); err != nil {
		return in, fmt.Errorf("listing EndpointSlices of %s/%s: %w", namespace, name, err)
	}
	for i := range slices.Items {
		in.Slices = append(in.Slices, &slices.Items[i])
	}
	return in, nil
}
