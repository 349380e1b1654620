// Package e2ebench measures fleetslice against kube-controller-manager's own EndpointSlice
// controller on a local ClusterSet: the same Deployment rollout runs in a member where fleetslice
// writes the slices and in a member where the built-in controller does, and each API server's
// request counters say how many EndpointSlice writes each controller made.
package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/localset"
)

// Side is one controller's run of the rollout.
type Side struct {
	Controller string
	Cluster    string
	// Writes counts EndpointSlice API writes by verb (create, update, patch, delete) during the
	// rollout only.
	Writes map[string]int
	// SetupWrites counts them while the Deployment first came up.
	SetupWrites map[string]int
	// PeakSlices and FinalSlices count the Service's slices.
	PeakSlices, FinalSlices int
	// Converged is the time from changing the template to every new Pod listed ready exactly once.
	Converged time.Duration
	// Timeline samples the rollout's cumulative writes every TimelineStep.
	Timeline []WritePoint
}

// WritePoint is the number of EndpointSlice writes made in the first At of the rollout.
type WritePoint struct {
	At     time.Duration
	Writes int
}

// TimelineStep is how often the rollout's writes are sampled for Side.Timeline.
const TimelineStep = 500 * time.Millisecond

// Scale scales the rollout's Deployment to pods in every given side's cluster at once and waits
// until each Service lists every ready Pod exactly once; memory figures are read after it.
func Scale(ctx context.Context, cs *localset.ClusterSet, sides []Side, pods int, opts Options) error {
	errs := make(chan error, len(sides))
	for _, side := range sides {
		go func() {
			errs <- scaleSide(ctx, cs, side.Cluster, pods, opts)
		}()
	}
	var first error
	for range sides {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	return first
}

func scaleSide(ctx context.Context, cs *localset.ClusterSet, cluster string, pods int, opts Options) error {
	c, err := cs.Client(cluster)
	if err != nil {
		return err
	}
	deploy := rolloutDeployment("bench-rollout", int32(pods))
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, pods))
	if err := c.Patch(ctx, deploy, patch); err != nil {
		return fmt.Errorf("scaling in %s: %w", cluster, err)
	}
	opts.Pods = pods
	if _, err := waitSettled(ctx, c, deploy, opts, nil); err != nil {
		return fmt.Errorf("waiting for %d ready endpoints in %s: %w", pods, cluster, err)
	}
	return nil
}

// Options size the rollout.
type Options struct {
	Pods    int
	Timeout time.Duration
	Log     io.Writer
}

// Rollout runs the same Deployment rollout in two members of cs and measures each. The first
// member must run fleetslice, the second kube-controller-manager's own EndpointSlice controller.
func Rollout(ctx context.Context, cs *localset.ClusterSet, opts Options) ([]Side, error) {
	if len(cs.Members) < 2 {
		return nil, fmt.Errorf("need two members, have %v", cs.Members)
	}
	sides := []Side{
		{Controller: "fleetslice", Cluster: cs.Members[0]},
		{Controller: "kube-controller-manager", Cluster: cs.Members[1]},
	}
	// Setting up is measured only by its writes, which each side's own API server counts, so
	// both sides set up at once; the rollouts, which are timed, run one after the other.
	baselines := make([]map[string]int, len(sides))
	errs := make([]error, len(sides))
	var wg sync.WaitGroup
	for i := range sides {
		wg.Go(func() {
			if baselines[i], errs[i] = setUpSide(ctx, cs, &sides[i], opts); errs[i] != nil {
				errs[i] = fmt.Errorf("%s in %s: %w", sides[i].Controller, sides[i].Cluster, errs[i])
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return sides, err
	}
	for i := range sides {
		if err := rollOutSide(ctx, cs, &sides[i], baselines[i], opts); err != nil {
			return sides, fmt.Errorf("%s in %s: %w", sides[i].Controller, sides[i].Cluster, err)
		}
	}
	return sides, nil
}

// sideClients are one side's client, REST configuration and log.
func sideClients(cs *localset.ClusterSet, side *Side, opts Options) (client.Client, *rest.Config, func(string, ...any), error) {
	c, err := cs.Client(side.Cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg, err := cs.RESTConfig(side.Cluster)
	if err != nil {
		return nil, nil, nil, err
	}
	logf := func(format string, args ...any) {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "[%s] "+format+"\n", append([]any{side.Controller}, args...)...)
		}
	}
	return c, cfg, logf, nil
}

// setUpSide creates the Service and its Deployment, waits for every endpoint to be ready, and
// returns the EndpointSlice write counters then.
func setUpSide(ctx context.Context, cs *localset.ClusterSet, side *Side, opts Options) (map[string]int, error) {
	c, cfg, logf, err := sideClients(cs, side, opts)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench-rollout"}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	deploy := rolloutDeployment(ns.Name, int32(opts.Pods))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: deploy.Name},
		Spec: corev1.ServiceSpec{
			Selector: deploy.Spec.Selector.MatchLabels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	before, err := endpointSliceWrites(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Create(ctx, svc); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, deploy); err != nil {
		return nil, err
	}
	logf("waiting for %d ready endpoints", opts.Pods)
	if _, err := waitSettled(ctx, c, deploy, opts, nil); err != nil {
		return nil, err
	}
	afterSetup, err := endpointSliceWrites(ctx, cfg)
	if err != nil {
		return nil, err
	}
	side.SetupWrites = diff(afterSetup, before)
	return afterSetup, nil
}

// rollOutSide rolls the Deployment to a new template and measures the EndpointSlice writes
// since afterSetup, over time and in all, until the Service has settled again.
func rollOutSide(ctx context.Context, cs *localset.ClusterSet, side *Side, afterSetup map[string]int, opts Options) error {
	c, cfg, logf, err := sideClients(cs, side, opts)
	if err != nil {
		return err
	}
	deploy := rolloutDeployment("bench-rollout", int32(opts.Pods))
	logf("rolling out a new template")
	if err := c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
		return err
	}
	deploy.Spec.Template.Annotations = map[string]string{"fleetslice.io/rollout": time.Now().Format(time.RFC3339Nano)}
	start := time.Now()
	if err := c.Update(ctx, deploy); err != nil {
		return err
	}
	sampled := sampleWrites(ctx, cfg, afterSetup, start)
	final, err := waitSettled(ctx, c, deploy, opts, &side.PeakSlices)
	side.Timeline = sampled()
	if err != nil {
		return err
	}
	side.Converged = time.Since(start)
	side.FinalSlices = final
	afterRollout, err := endpointSliceWrites(ctx, cfg)
	if err != nil {
		return err
	}
	side.Writes = diff(afterRollout, afterSetup)
	logf("converged in %s with %d slices; writes %v", side.Converged.Round(time.Millisecond), final, side.Writes)
	return nil
}

// sampleWrites polls the API server's EndpointSlice write counters every TimelineStep from start
// until the returned function is called, which returns the samples. A failed poll is skipped:
// the picture loses a point, the totals (read separately) stay exact.
func sampleWrites(ctx context.Context, cfg *rest.Config, base map[string]int, start time.Time) func() []WritePoint {
	done := make(chan struct{})
	result := make(chan []WritePoint, 1)
	go func() {
		points := []WritePoint{{At: 0, Writes: 0}}
		ticker := time.NewTicker(TimelineStep)
		defer ticker.Stop()
		for {
			select {
			case <-done:
				result <- points
				return
			case <-ctx.Done():
				result <- points
				return
			case <-ticker.C:
				now, err := endpointSliceWrites(ctx, cfg)
				if err == nil {
					points = append(points, WritePoint{At: time.Since(start), Writes: TotalWrites(diff(now, base))})
				}
			}
		}
	}()
	return func() []WritePoint {
		close(done)
		return <-result
	}
}

// TotalWrites adds up creates, updates, patches and deletes.
func TotalWrites(w map[string]int) int {
	return w["create"] + w["update"] + w["patch"] + w["delete"]
}

// waitSettled waits until the Deployment has rolled out and its Service lists every ready Pod
// exactly once with no terminating endpoint left; it returns the slice count then and tracks the
// peak slice count on the way.
func waitSettled(ctx context.Context, c client.Client, deploy *appsv1.Deployment, opts Options, peak *int) (int, error) {
	slices := 0
	last := ""
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, opts.Timeout, true, func(ctx context.Context) (bool, error) {
		// A busy simulated API server sometimes drops a request; polling again is the cure, and
		// the timeout still bounds the wait.
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(deploy), d); err != nil {
			last = "reading the Deployment: " + err.Error()
			return false, nil
		}
		list := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, list, client.InNamespace(deploy.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: deploy.Name}); err != nil {
			last = "listing the EndpointSlices: " + err.Error()
			return false, nil
		}
		slices = len(list.Items)
		if peak != nil && slices > *peak {
			*peak = slices
		}
		// An address may show up twice for a moment when a new Pod reuses a deleted Pod's IP
		// before the next sync; settled means every address once.
		seen := map[string]bool{}
		ready, others := 0, 0
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				seen[ep.Addresses[0]] = true
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				} else {
					others++
				}
			}
		}
		rolled := d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
			d.Status.Replicas == *d.Spec.Replicas && d.Status.ReadyReplicas == *d.Spec.Replicas
		last = fmt.Sprintf("Deployment generation %d observed %d, replicas %d updated %d ready %d; slices list %d ready, %d other endpoints, %d addresses",
			d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, ready, others, len(seen))
		return rolled && ready == opts.Pods && others == 0 && len(seen) == opts.Pods, nil
	})
	if err != nil && last != "" {
		err = fmt.Errorf("%w (last seen: %s)", err, last)
	}
	return slices, err
}

func rolloutDeployment(ns string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "rollout"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rollout"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromString("25%")),
					MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone, WhenUnsatisfiable: corev1.ScheduleAnyway,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
					}},
					Containers: []corev1.Container{{
						Name: "app", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
						Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					}},
				},
			},
		},
	}
}

func diff(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for verb, n := range after {
		if d := n - before[verb]; d > 0 {
			out[verb] = d
		}
	}
	return out
}
