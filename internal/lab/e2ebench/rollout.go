// Package e2ebench measures fleetslice against kube-controller-manager's own EndpointSlice
// controller on a local ClusterSet: both controllers write slices for the same Service in one
// member cluster, each its own set told apart by the managed-by label, so they see the very same
// Pod changes; the API server's audit log says which of them made each write.
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
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
	// Latency holds the phase's network programming latencies, one per write that carried a
	// trigger time; FirstLatency only each slice's first write of each trigger time.
	Latency, FirstLatency Latencies
	// Stats are the controller's own counters over the phase.
	Stats ControllerStats
	// Timeline samples the phase's cumulative writes every TimelineStep.
	Timeline []WritePoint
}

// Side is one controller and what was measured of it.
type Side struct {
	Controller string
	// managedBy is the managed-by label of the slices the controller writes; userAgent starts
	// the user agent of its requests, which tells its writes apart in the audit log.
	managedBy, userAgent string
	stats                statsSource
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

// TimelineStep is the spacing of a phase's Phase.Timeline points.
const TimelineStep = 500 * time.Millisecond

// Options size the rollout.
type Options struct {
	Pods    int
	Timeout time.Duration
	Log     io.Writer
}

// Comparison is both controllers writing the slices of one Service over one Deployment in the
// member Cluster, and optionally a Baseline member whose kube-controller-manager runs without
// its EndpointSlice controller and whose copy of the workload follows every step unmeasured, so
// that the two kube-controller-managers' memory can be told apart.
type Comparison struct {
	Cluster, Baseline string
	Sides             []Side
	cs                *localset.ClusterSet
	opts              Options
}

// NewComparison sets up the comparison in cluster, whose API server must write its audit log
// (localset.Options.AuditEndpointSliceWrites) and whose kube-controller-manager runs its own
// EndpointSlice controller; fleetslice's manager serves metrics at managerMetrics. baseline may
// be empty.
func NewComparison(cs *localset.ClusterSet, cluster, baseline, managerMetrics string, opts Options) (*Comparison, error) {
	for _, m := range []string{cluster, baseline} {
		if m != "" && !slices.Contains(cs.Members, m) {
			return nil, fmt.Errorf("no member %s in the ClusterSet (members %v)", m, cs.Members)
		}
	}
	if cluster == baseline {
		return nil, fmt.Errorf("the baseline must be another member than %s", cluster)
	}
	pid, err := ControllerManagerPID(cs, cluster)
	if err != nil {
		return nil, err
	}
	kcm, err := controllerManagerMetricsURL(pid)
	if err != nil {
		return nil, err
	}
	return &Comparison{Cluster: cluster, Baseline: baseline, cs: cs, opts: opts, Sides: []Side{
		{Controller: "fleetslice", managedBy: endpointslice.ManagedBy, userAgent: "manager/",
			stats: statsSource{url: managerMetrics, query: fleetsliceStats}},
		{Controller: "kube-controller-manager", managedBy: endpointslice.UpstreamManagedBy,
			userAgent: "kube-controller-manager/", stats: statsSource{url: kcm, query: upstreamStats}},
	}}, nil
}

// SetUp creates the namespace, the Service and its Deployment and measures both controllers until
// every endpoint is ready in each one's slices (the baseline's copy is created at the same time).
func (c *Comparison) SetUp(ctx context.Context) error {
	create := func(cl client.Client) error { return createWorkload(ctx, cl, c.opts.Pods) }
	var baselineErr error
	var wg sync.WaitGroup
	if c.Baseline != "" {
		wg.Go(func() { baselineErr = c.onBaseline(ctx, c.opts.Pods, create) })
	}
	phases, err := c.measure(ctx, c.opts.Pods, "creating the Deployment", create)
	wg.Wait()
	if err = errors.Join(err, baselineErr); err != nil {
		return err
	}
	for i := range c.Sides {
		c.Sides[i].Setup = phases[i]
	}
	return nil
}

// RollOut rolls the Deployment to a new template, appends the measured phase to each side's
// Rollouts, then rolls the baseline's copy.
func (c *Comparison) RollOut(ctx context.Context) error {
	roll := func(cl client.Client) error {
		deploy := rolloutDeployment(workloadNamespace, int32(c.opts.Pods))
		if err := cl.Get(ctx, client.ObjectKeyFromObject(deploy), deploy); err != nil {
			return err
		}
		deploy.Spec.Template.Annotations = map[string]string{"fleetslice.io/rollout": time.Now().Format(time.RFC3339Nano)}
		return cl.Update(ctx, deploy)
	}
	phases, err := c.measure(ctx, c.opts.Pods, "rolling out a new template", roll)
	if err != nil {
		return err
	}
	for i := range c.Sides {
		c.Sides[i].Rollouts = append(c.Sides[i].Rollouts, phases[i])
	}
	return c.onBaseline(ctx, c.opts.Pods, roll)
}

// Scale scales the Deployment to pods and records the phase as each side's ScaleUp, then scales
// the baseline's copy; memory figures are read after it.
func (c *Comparison) Scale(ctx context.Context, pods int) error {
	scale := func(cl client.Client) error {
		deploy := rolloutDeployment(workloadNamespace, int32(pods))
		return cl.Patch(ctx, deploy, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, pods)))
	}
	phases, err := c.measure(ctx, pods, fmt.Sprintf("scaling to %d Pods", pods), scale)
	if err != nil {
		return err
	}
	for i := range c.Sides {
		c.Sides[i].ScaleUp = &phases[i]
	}
	return c.onBaseline(ctx, pods, scale)
}

// onBaseline applies act to the baseline's copy of the workload and waits for its Deployment to
// roll out; without a baseline it does nothing.
func (c *Comparison) onBaseline(ctx context.Context, pods int, act func(client.Client) error) error {
	if c.Baseline == "" {
		return nil
	}
	cl, err := c.cs.Client(c.Baseline)
	if err != nil {
		return err
	}
	if err := act(cl); err != nil {
		return fmt.Errorf("baseline %s: %w", c.Baseline, err)
	}
	deploy := rolloutDeployment(workloadNamespace, int32(pods))
	err = wait.PollUntilContextTimeout(ctx, SettlePoll, c.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := cl.Get(ctx, client.ObjectKeyFromObject(deploy), d); err != nil {
			return false, nil
		}
		return rolledOut(d), nil
	})
	if err != nil {
		return fmt.Errorf("baseline %s: waiting for the Deployment to roll out: %w", c.Baseline, err)
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

// measure runs act on the comparison's cluster and measures both controllers until each one's
// slices list the pods endpoints, all ready: writes (from the audit log, by user agent), the write
// timeline, latencies (from a slice watch) and each controller's own counters. The returned
// phases are in the order of Sides.
func (c *Comparison) measure(ctx context.Context, pods int, what string, act func(client.Client) error) ([]Phase, error) {
	fail := func(err error) ([]Phase, error) {
		return nil, fmt.Errorf("%s, %s: %w", c.Cluster, what, err)
	}
	cl, err := c.cs.Client(c.Cluster)
	if err != nil {
		return fail(err)
	}
	cfg, err := c.cs.RESTConfig(c.Cluster)
	if err != nil {
		return fail(err)
	}
	audit, err := tailAudit(c.cs.AuditLog(c.Cluster))
	if err != nil {
		return fail(err)
	}
	statsBefore := make([]ControllerStats, len(c.Sides))
	for i, s := range c.Sides {
		if statsBefore[i], err = s.stats.read(ctx); err != nil {
			return fail(err)
		}
	}
	stopWatch, err := watchLatencies(ctx, cfg, workloadNamespace, "rollout")
	if err != nil {
		return fail(err)
	}
	c.logf("%s", what)
	start := time.Now()
	stopTrace, err := tracePods(ctx, cfg, workloadNamespace, "both", what, start)
	if err != nil {
		_, _ = stopWatch()
		return fail(err)
	}
	defer func() { _ = stopTrace() }()
	if err := act(cl); err != nil {
		_, _ = stopWatch()
		return fail(err)
	}
	settled, rolledAt, err := waitSettled(ctx, cl, rolloutDeployment(workloadNamespace, int32(pods)), c.Sides, pods, c.opts.Timeout)
	samples, watchErr := stopWatch()
	if err = errors.Join(err, watchErr); err != nil {
		return fail(err)
	}
	writes, err := audit.next()
	if err != nil {
		return fail(err)
	}
	if other := unattributed(writes, c.Sides); len(other) > 0 {
		return fail(fmt.Errorf("EndpointSlice writes in %s by neither controller, from user agents %v", workloadNamespace, other))
	}
	phases := make([]Phase, len(c.Sides))
	for i, s := range c.Sides {
		p := &phases[i]
		p.Converged, p.Rolled = settled[i].at.Sub(start), rolledAt.Sub(start)
		p.PeakSlices, p.FinalSlices = settled[i].peak, settled[i].slices
		mine := writesOf(writes, s.userAgent)
		p.Writes, p.Timeline = countWrites(mine), timeline(mine, start, p.Converged)
		mySamples := samplesOf(samples, s.managedBy)
		for _, ls := range mySamples {
			p.Latency = append(p.Latency, ls.latency())
			if !ls.repeat {
				p.FirstLatency = append(p.FirstLatency, ls.latency())
			}
		}
		statsAfter, err := s.stats.read(ctx)
		if err != nil {
			return fail(err)
		}
		p.Stats = statsAfter.Sub(statsBefore[i])
		c.logf("[%s] settled in %s with %d slices; writes %v, latency p50 %s p99 %s of %d writes (first write of each "+
			"trigger: p99 %s of %d); controller %+v", s.Controller,
			p.Converged.Round(time.Millisecond), p.FinalSlices, p.Writes, p.Latency.Quantile(0.5), p.Latency.Quantile(0.99),
			len(p.Latency), p.FirstLatency.Quantile(0.99), len(p.FirstLatency), p.Stats)
		// Where the tail comes from: the slowest samples, on the phase's clock.
		for _, ls := range slowest(mySamples, slowestLogged) {
			c.logf("[%s]   slow: %s triggered at %s, written at %s (%s, repeat %t)", s.Controller, ls.slice,
				ls.trigger.Sub(start).Round(time.Millisecond), ls.write.Sub(start).Round(time.Millisecond),
				ls.latency().Round(time.Millisecond), ls.repeat)
		}
	}
	return phases, nil
}

func (c *Comparison) logf(format string, args ...any) {
	if c.opts.Log != nil {
		fmt.Fprintf(c.opts.Log, format+"\n", args...)
	}
}

// TotalWrites adds up creates, updates, patches and deletes.
func TotalWrites(w map[string]int) int {
	return w["create"] + w["update"] + w["patch"] + w["delete"]
}

// rolledOut reports whether a Deployment has every replica updated and ready at its generation.
func rolledOut(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas &&
		d.Status.Replicas == *d.Spec.Replicas && d.Status.ReadyReplicas == *d.Spec.Replicas
}

// settledSide is when one controller's slices first listed every ready Pod exactly once with
// nothing terminating, how many slices it had then and the most it had on the way.
type settledSide struct {
	at           time.Time
	slices, peak int
}

// waitSettled waits until the Deployment has rolled out and each side's slices list every ready
// Pod exactly once with no terminating endpoint left; it returns when each side first got there
// and when the Deployment was first seen rolled out (never after a side settled, since settling
// needs it).
func waitSettled(ctx context.Context, c client.Client, deploy *appsv1.Deployment, sides []Side, pods int, timeout time.Duration) ([]settledSide, time.Time, error) {
	out := make([]settledSide, len(sides))
	var rolledAt time.Time
	last := ""
	err := wait.PollUntilContextTimeout(ctx, SettlePoll, timeout, true, func(ctx context.Context) (bool, error) {
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
		now := time.Now()
		rolled := rolledOut(d)
		if rolled && rolledAt.IsZero() {
			rolledAt = now
		}
		last = fmt.Sprintf("Deployment generation %d observed %d, replicas %d updated %d ready %d",
			d.Generation, d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas)
		all := true
		for i, s := range sides {
			n, ready, others, addresses := countEndpoints(list.Items, s.managedBy)
			out[i].peak = max(out[i].peak, n)
			last += fmt.Sprintf("; %s's slices list %d ready, %d other endpoints, %d addresses", s.Controller, ready, others, addresses)
			if out[i].at.IsZero() && rolled && ready == pods && others == 0 && addresses == pods {
				out[i].at, out[i].slices = now, n
			}
			all = all && !out[i].at.IsZero()
		}
		return all, nil
	})
	if err != nil && last != "" {
		err = fmt.Errorf("%w (last seen: %s)", err, last)
	}
	return out, rolledAt, err
}

// countEndpoints counts the slices labelled managed-by managedBy, their ready and other endpoints,
// and their distinct addresses: an address may show up twice for a moment when a new Pod reuses
// a deleted Pod's IP before the next sync, and settled means every address once.
func countEndpoints(list []discoveryv1.EndpointSlice, managedBy string) (n, ready, others, addresses int) {
	seen := map[string]bool{}
	for _, s := range list {
		if s.Labels[discoveryv1.LabelManagedBy] != managedBy {
			continue
		}
		n++
		for _, ep := range s.Endpoints {
			seen[ep.Addresses[0]] = true
			if ptr.Deref(ep.Conditions.Ready, false) {
				ready++
			} else {
				others++
			}
		}
	}
	return n, ready, others, len(seen)
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
