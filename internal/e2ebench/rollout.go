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
	"slices"
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

// Phase is one measured step of one side: the first creation of the Deployment, a rollout, or a
// scale-up.
type Phase struct {
	// Writes counts EndpointSlice API writes by verb (create, update, patch, delete) during the
	// phase, as the side's API server counted them.
	Writes map[string]int
	// PeakSlices and FinalSlices count the Service's slices.
	PeakSlices, FinalSlices int
	// Converged is the time from the change until every Pod is listed ready exactly once.
	Converged time.Duration
	// Rolled is the time from the change until the Deployment first reported every replica
	// updated and ready: the workload's own pace, which no EndpointSlice controller sets.
	// Converged minus Rolled is how far the slices trailed the workload.
	Rolled time.Duration
	// Latency holds the phase's network programming latencies.
	Latency Latencies
	// Stats are the controller's own counters over the phase.
	Stats ControllerStats
	// Timeline samples the phase's cumulative writes every TimelineStep.
	Timeline []WritePoint
}

// Side is one controller's cluster and what was measured there.
type Side struct {
	Controller string
	Cluster    string
	stats      statsSource
	// Setup is the Deployment's first creation, Rollouts each rollout in order, ScaleUp the scale
	// to the memory size (nil until Scale ran).
	Setup    Phase
	Rollouts []Phase
	ScaleUp  *Phase
}

// WritePoint is the number of EndpointSlice writes made in the first At of a phase.
type WritePoint struct {
	At     time.Duration
	Writes int
}

// SettlePoll is how often a phase reads its Deployment and slices while waiting for them to settle,
// which bounds how finely Converged and Rolled are measured.
const SettlePoll = 250 * time.Millisecond

// TimelineStep is how often a phase's writes are sampled for Phase.Timeline.
const TimelineStep = 500 * time.Millisecond

// Options size the rollout.
type Options struct {
	Pods    int
	Timeout time.Duration
	Log     io.Writer
}

// NewSides names the two sides of a comparison: fleetslice in the member named fleetslice (its
// manager serving metrics at managerMetrics), kube-controller-manager's own controller in the other.
func NewSides(cs *localset.ClusterSet, fleetslice, managerMetrics string) ([]Side, error) {
	i := slices.Index(cs.Members, fleetslice)
	if len(cs.Members) != 2 || i < 0 {
		return nil, fmt.Errorf("need two members, one of them %s; have %v", fleetslice, cs.Members)
	}
	upstream := cs.Members[1-i]
	pid, err := ControllerManagerPID(cs, upstream)
	if err != nil {
		return nil, err
	}
	kcm, err := controllerManagerMetricsURL(pid)
	if err != nil {
		return nil, err
	}
	return []Side{
		{Controller: "fleetslice", Cluster: fleetslice, stats: statsSource{url: managerMetrics, query: fleetsliceStats}},
		{Controller: "kube-controller-manager", Cluster: upstream, stats: statsSource{url: kcm, query: upstreamStats}},
	}, nil
}

// SetUp creates the Service and its Deployment of opts.Pods replicas on every side at once and
// measures each until every endpoint is ready. Its timing is not compared (the sides compete for
// the machine), its writes and latencies are.
func SetUp(ctx context.Context, cs *localset.ClusterSet, sides []Side, opts Options) error {
	errs := make([]error, len(sides))
	var wg sync.WaitGroup
	for i := range sides {
		wg.Go(func() {
			sides[i].Setup, errs[i] = measure(ctx, cs, &sides[i], opts, "creating the Deployment", func(c client.Client) error {
				return createWorkload(ctx, c, opts.Pods)
			})
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// RollOut rolls every side's Deployment to a new template, one side after the other (the last
// first when reversed, so that taking turns evens out who runs while the machine is busier), and
// appends the measured phase to each side's Rollouts.
func RollOut(ctx context.Context, cs *localset.ClusterSet, sides []Side, opts Options, reversed bool) error {
	for n := range sides {
		i := n
		if reversed {
			i = len(sides) - 1 - n
		}
		phase, err := measure(ctx, cs, &sides[i], opts, "rolling out a new template", func(c client.Client) error {
			deploy := rolloutDeployment(workloadNamespace, int32(opts.Pods))
			if err := c.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
				return err
			}
			deploy.Spec.Template.Annotations = map[string]string{"fleetslice.io/rollout": time.Now().Format(time.RFC3339Nano)}
			return c.Update(ctx, deploy)
		})
		if err != nil {
			return err
		}
		sides[i].Rollouts = append(sides[i].Rollouts, phase)
	}
	return nil
}

// Scale scales every side's Deployment to pods, one side after the other, and records the phase
// as ScaleUp; memory figures are read after it.
func Scale(ctx context.Context, cs *localset.ClusterSet, sides []Side, pods int, opts Options) error {
	for i := range sides {
		phase, err := measure(ctx, cs, &sides[i], Options{Pods: pods, Timeout: opts.Timeout, Log: opts.Log},
			fmt.Sprintf("scaling to %d Pods", pods), func(c client.Client) error {
				deploy := rolloutDeployment(workloadNamespace, int32(pods))
				return c.Patch(ctx, deploy, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, pods)))
			})
		if err != nil {
			return err
		}
		sides[i].ScaleUp = &phase
	}
	return nil
}

const workloadNamespace = "bench-rollout"

// createWorkload creates the namespace, the Service and its Deployment.
func createWorkload(ctx context.Context, c client.Client, pods int) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNamespace}}
	if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	deploy := rolloutDeployment(ns.Name, int32(pods))
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: deploy.Name},
		Spec: corev1.ServiceSpec{
			Selector: deploy.Spec.Selector.MatchLabels,
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
		},
	}
	if err := c.Create(ctx, svc); err != nil {
		return err
	}
	return c.Create(ctx, deploy)
}

// slowestLogged is how many of a phase's slowest latency samples the log lists.
const slowestLogged = 12

// measure runs act on a side and measures until its Service has settled at opts.Pods endpoints:
// writes (from the API server), the write timeline, latencies (from a slice watch) and the
// controller's own counters.
func measure(ctx context.Context, cs *localset.ClusterSet, side *Side, opts Options, what string, act func(client.Client) error) (Phase, error) {
	var p Phase
	fail := func(err error) (Phase, error) {
		return p, fmt.Errorf("%s in %s, %s: %w", side.Controller, side.Cluster, what, err)
	}
	c, err := cs.Client(side.Cluster)
	if err != nil {
		return fail(err)
	}
	cfg, err := cs.RESTConfig(side.Cluster)
	if err != nil {
		return fail(err)
	}
	before, err := endpointSliceWrites(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	statsBefore, err := side.stats.read(ctx)
	if err != nil {
		return fail(err)
	}
	stopWatch, err := watchLatencies(ctx, cfg, workloadNamespace, "rollout")
	if err != nil {
		return fail(err)
	}
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "[%s] %s\n", side.Controller, what)
	}
	start := time.Now()
	stopTrace, err := tracePods(ctx, cfg, workloadNamespace, side.Controller, what, start)
	if err != nil {
		_, _ = stopWatch()
		return fail(err)
	}
	defer func() { _ = stopTrace() }()
	if err := act(c); err != nil {
		_, _ = stopWatch()
		return fail(err)
	}
	sampled := sampleWrites(ctx, cfg, before, start)
	final, rolledAt, err := waitSettled(ctx, c, rolloutDeployment(workloadNamespace, int32(opts.Pods)), opts, &p.PeakSlices)
	p.Converged = time.Since(start)
	p.Rolled = rolledAt.Sub(start)
	p.Timeline = sampled()
	samples, watchErr := stopWatch()
	if err = errors.Join(err, watchErr); err != nil {
		return fail(err)
	}
	p.FinalSlices = final
	for _, s := range samples {
		p.Latency = append(p.Latency, s.latency())
	}
	after, err := endpointSliceWrites(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	statsAfter, err := side.stats.read(ctx)
	if err != nil {
		return fail(err)
	}
	p.Writes, p.Stats = diff(after, before), statsAfter.Sub(statsBefore)
	if opts.Log != nil {
		fmt.Fprintf(opts.Log, "[%s] settled in %s with %d slices; writes %v, latency p50 %s p99 %s; controller %+v\n", side.Controller,
			p.Converged.Round(time.Millisecond), final, p.Writes, p.Latency.Quantile(0.5), p.Latency.Quantile(0.99), p.Stats)
		// Where the tail comes from: the slowest samples, on the phase's clock.
		for _, s := range slowest(samples, slowestLogged) {
			fmt.Fprintf(opts.Log, "[%s]   slow: %s triggered at %s, written at %s (%s)\n", side.Controller, s.slice,
				s.trigger.Sub(start).Round(time.Millisecond), s.write.Sub(start).Round(time.Millisecond), s.latency().Round(time.Millisecond))
		}
	}
	return p, nil
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
// exactly once with no terminating endpoint left; it returns the slice count then and when it first
// saw the Deployment rolled out (never after it settled, since settling needs it; zero only with an
// error), and tracks the peak slice count on the way.
func waitSettled(ctx context.Context, c client.Client, deploy *appsv1.Deployment, opts Options, peak *int) (int, time.Time, error) {
	slices := 0
	last := ""
	var rolledAt time.Time
	err := wait.PollUntilContextTimeout(ctx, SettlePoll, opts.Timeout, true, func(ctx context.Context) (bool, error) {
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
		if rolled && rolledAt.IsZero() {
			rolledAt = time.Now()
		}
		last = fmt.Sprintf("Deployment generation %d observed %d, replicas %d updated %d ready %d; slices list %d ready, %d other endpoints, %d addresses",
			d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, ready, others, len(seen))
		return rolled && ready == opts.Pods && others == 0 && len(seen) == opts.Pods, nil
	})
	if err != nil && last != "" {
		err = fmt.Errorf("%w (last seen: %s)", err, last)
	}
	return slices, rolledAt, err
}

func rolloutDeployment(ns string, replicas int32) *appsv1.Deployment {
	return RollingDeployment(ns, "rollout", replicas)
}

// RollingDeployment is a Deployment of agnhost Pods labelled app=<name>, spread over zones, that
// rolls 25% at a time (maxSurge and maxUnavailable), as a typical production Deployment does.
func RollingDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxSurge:       ptr.To(intstr.FromString("25%")),
					MaxUnavailable: ptr.To(intstr.FromString("25%")),
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
