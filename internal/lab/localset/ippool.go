package localset

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// warmIPPools gives every Node one Pod, one at a time per Node, and deletes it once it has an
// address. kwok v0.8.0 creates a Node's address pool when it places the first Pod there, without
// a lock: two Pods placed at once on a fresh Node could each get a new pool and the same first
// address (seen in test/tiers: "route add 10.3.0.1/32: File exists", one web Pod never ran).
// Once a pool exists, kwok hands out its addresses under the pool's own lock.
func warmIPPools(ctx context.Context, c client.Client, nodes []string) error {
	if err := waitServiceAccount(ctx, c, metav1.NamespaceDefault); err != nil {
		return err
	}
	pods := make([]*corev1.Pod, 0, len(nodes))
	for _, node := range nodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "ip-pool-warmup-" + node},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "warmup", Image: "registry.k8s.io/pause:3.10"}},
				TerminationGracePeriodSeconds: new(int64)},
		}
		if err := c.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %s: %w", pod.Name, err)
		}
		pods = append(pods, pod)
	}
	for _, pod := range pods {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			got := &corev1.Pod{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(pod), got); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			return got.Status.PodIP != "", nil
		})
		if err != nil {
			return fmt.Errorf("waiting for kwok to give %s an address on %s: %w", pod.Name, pod.Spec.NodeName, err)
		}
		if err := client.IgnoreNotFound(c.Delete(ctx, pod, client.GracePeriodSeconds(0))); err != nil {
			return fmt.Errorf("deleting %s: %w", pod.Name, err)
		}
	}
	return nil
}

// waitServiceAccount waits for the controller-manager to create namespace's default
// ServiceAccount: until it has, the API server's ServiceAccount admission refuses every Pod
// there (a fresh cluster's first Pods met "serviceaccount \"default\" not found" in a loaded
// make test).
func waitServiceAccount(ctx context.Context, c client.Client, namespace string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: "default"}, &corev1.ServiceAccount{})
		return err == nil, client.IgnoreNotFound(err)
	})
	if err != nil {
		return fmt.Errorf("waiting for the ServiceAccount %s/default: %w", namespace, err)
	}
	return nil
}
