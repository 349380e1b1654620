package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// mcsNamespace holds the exported Services in every member.
const mcsNamespace = "bench-mcs"

// MCSOptions size the measurement: every member exports Services (same names everywhere, headless
// ones make Headless imports without derived Services); Samples of them get one more ready
// endpoint in the first member, ChangeInterval apart so each latency is one change's, not a
// burst's queue; Seed picks the sample.
type MCSOptions struct {
	Services, Samples int
	Headless          bool
	ChangeInterval    time.Duration
	Seed              uint64
	Timeout           time.Duration
	Log               io.Writer
}

// Propagation holds, per (sampled Service, other member) pair, the time from the new endpoint
// becoming ready in the origin to it being listed ready in that member's imported slices.
// FromWatch starts when our own Pod watch in the origin saw the Pod Ready: a lower bound.
// FromCondition starts at the Pod's Ready lastTransitionTime, which the API serialises in whole
// seconds: an upper bound, up to a second above the truth. Missing pairs were not seen in time;
// Settled is the time from creating the Services to every member importing every cluster's
// endpoints of every Service.
type Propagation struct {
	Origin                   string
	Settled                  time.Duration
	FromWatch, FromCondition []time.Duration
	Missing                  int
}

// Withdrawal is one member's view of a lost cluster: the time from the lost cluster's Lease
// expiring (and from stopping its manager) to the member holding none of the SlicesBefore
// imported slices of that cluster it held, and to the first of them going.
type Withdrawal struct {
	Member                                   string
	AfterExpiry, AfterStop, FirstAfterExpiry time.Duration
	SlicesBefore                             int
}

// importWatch follows one member's imported EndpointSlices through an informer and remembers
// when each ready address first appeared and when each source cluster's slices last went away.
type importWatch struct {
	store      cache.Store
	mu         sync.Mutex
	firstReady map[string]time.Time // by importKey
	// By source cluster: the first deletion of one of its slices, and the last drop to none.
	firstGone, emptySince map[string]time.Time
}

func importKey(service, source, address string) string { return service + "/" + source + "/" + address }

func (w *importWatch) observe(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	now := time.Now()
	svc, source := s.Labels[mcsv1beta1.LabelServiceName], s.Labels[mcsv1beta1.LabelSourceCluster]
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ep := range s.Endpoints {
		for _, addr := range ep.Addresses {
			if key := importKey(svc, source, addr); isReady(ep) && w.firstReady[key].IsZero() {
				w.firstReady[key] = now
			}
		}
	}
}

func (w *importWatch) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	source, now := s.Labels[mcsv1beta1.LabelSourceCluster], time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstGone[source].IsZero() {
		w.firstGone[source] = now
	}
	// The store already lacks the deleted slice when handlers run.
	if w.slicesFrom(source) == 0 {
		w.emptySince[source] = now
	}
}

func (w *importWatch) slicesFrom(source string) int {
	return len(slices.DeleteFunc(w.store.List(), func(obj any) bool {
		s, ok := obj.(*discoveryv1.EndpointSlice)
		return !ok || s.Labels[mcsv1beta1.LabelSourceCluster] != source
	}))
}

// readySources lists, per Service, the source clusters with at least one ready endpoint.
func (w *importWatch) readySources() map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, obj := range w.store.List() {
		s, _ := obj.(*discoveryv1.EndpointSlice)
		if s == nil || !slices.ContainsFunc(s.Endpoints, isReady) {
			continue
		}
		svc := s.Labels[mcsv1beta1.LabelServiceName]
		if out[svc] == nil {
			out[svc] = map[string]bool{}
		}
		out[svc][s.Labels[mcsv1beta1.LabelSourceCluster]] = true
	}
	return out
}

func isReady(ep discoveryv1.Endpoint) bool { return ptr.Deref(ep.Conditions.Ready, false) }

// readyPod is a Pod of the origin as our watch saw it turn ready.
type readyPod struct {
	service, ip         string
	observed, condition time.Time
}

// podWatch remembers the origin's Pods that have turned ready, by name.
type podWatch struct {
	mu    sync.Mutex
	ready map[string]readyPod
}

func (w *podWatch) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.Status.PodIP == "" {
		return
	}
	for _, c := range pod.Status.Conditions {
		if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue {
			continue
		}
		w.mu.Lock()
		if _, seen := w.ready[pod.Name]; !seen {
			w.ready[pod.Name] = readyPod{service: pod.Labels["app"], ip: pod.Status.PodIP, observed: time.Now(), condition: c.LastTransitionTime.Time}
		}
		w.mu.Unlock()
	}
}

func (w *podWatch) snapshot() map[string]readyPod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.ready)
}

// MCSRun holds the watches between the two measurements.
type MCSRun struct {
	cs      *localset.ClusterSet
	opts    MCSOptions
	imports map[string]*importWatch
	pods    *podWatch
	stop    context.CancelFunc
}

// StartMCS starts watching every member's imported EndpointSlices and the first member's Pods in
// the benchmark namespace. Close stops the watches.
func StartMCS(ctx context.Context, cs *localset.ClusterSet, opts MCSOptions) (run *MCSRun, err error) {
	if len(cs.Members) < 2 || opts.Samples < 1 || opts.Samples > opts.Services {
		return nil, fmt.Errorf("need two members (have %v) and 1 <= samples (%d) <= services (%d)", cs.Members, opts.Samples, opts.Services)
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	watchCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer func() {
		if err != nil {
			stop()
		}
	}()
	run = &MCSRun{cs: cs, opts: opts, imports: map[string]*importWatch{}, pods: &podWatch{ready: map[string]readyPod{}}, stop: stop}
	for i, m := range cs.Members {
		cfg, err := cs.RESTConfig(m)
		if err != nil {
			return nil, err
		}
		clientset, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(mcsNamespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = mcsv1beta1.LabelSourceCluster }))
		informer := factory.Discovery().V1().EndpointSlices().Informer()
		w := &importWatch{store: informer.GetStore(), firstReady: map[string]time.Time{}, firstGone: map[string]time.Time{}, emptySince: map[string]time.Time{}}
		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: w.observe, UpdateFunc: func(_, obj any) { w.observe(obj) }, DeleteFunc: w.deleted,
		}); err != nil {
			return nil, err
		}
		run.imports[m] = w
		if i == 0 {
			pods := factory.InformerFor(&corev1.Pod{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
				return coreinformers.NewPodInformer(c, mcsNamespace, resync, cache.Indexers{})
			})
			if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: run.pods.observe, UpdateFunc: func(_, obj any) { run.pods.observe(obj) },
			}); err != nil {
				return nil, err
			}
		}
		factory.Start(watchCtx.Done())
	}
	return run, nil
}

// Close stops the watches.
func (r *MCSRun) Close() { r.stop() }

func (r *MCSRun) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Log, "[mcs] "+format+"\n", args...)
}

func serviceName(i int) string { return fmt.Sprintf("svc-%04d", i) }

// Propagate creates the Services, waits until every member imports every cluster's endpoints of
// every Service, then gives a sample one more Pod each in the first member and times the new
// address's arrival in every other member.
func (r *MCSRun) Propagate(ctx context.Context) (*Propagation, error) {
	origin := r.cs.Members[0]
	result := &Propagation{Origin: origin}
	start := time.Now()
	if err := r.createServices(ctx); err != nil {
		return nil, fmt.Errorf("creating Services: %w", err)
	}
	r.logf("created %d exported Services in each of %v in %s", r.opts.Services, r.cs.Members, time.Since(start).Round(time.Millisecond))
	if err := r.waitImported(ctx); err != nil {
		return nil, err
	}
	result.Settled = time.Since(start)
	r.logf("every member imports every cluster's endpoints after %s", result.Settled.Round(time.Millisecond))

	c, err := r.cs.Client(origin)
	if err != nil {
		return nil, err
	}
	scaling := time.Now()
	rng := rand.New(rand.NewPCG(r.opts.Seed, r.opts.Seed^0x9e3779b97f4a7c15))
	sample := rng.Perm(r.opts.Services)[:r.opts.Samples]
	sampled := map[string]bool{}
	for _, i := range sample {
		name := serviceName(i)
		sampled[name] = true
		if err := c.Create(ctx, backendPod(name, 1)); err != nil {
			return nil, fmt.Errorf("adding a Pod to %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(r.opts.ChangeInterval):
		}
	}
	r.logf("gave %d Services one more Pod in %s", len(sample), origin)

	// Reading our in-memory watch results, not the API: cheap and as fresh as the watches.
	var seen *Propagation
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.opts.Timeout, true, func(context.Context) (bool, error) {
		seen = r.arrivals(origin, scaling, sampled)
		return seen.Missing == 0, nil
	})
	result.FromWatch, result.FromCondition, result.Missing = seen.FromWatch, seen.FromCondition, seen.Missing
	r.logf("%d (Service, member) pairs seen, %d missing", len(result.FromWatch), result.Missing)
	if err != nil && !wait.Interrupted(err) {
		return nil, err
	}
	return result, nil
}

// arrivals pairs each sampled Service's new ready Pod with its arrival in every other member.
func (r *MCSRun) arrivals(origin string, scaling time.Time, sampled map[string]bool) *Propagation {
	newPods := map[string]readyPod{}
	for _, p := range r.pods.snapshot() {
		if p.observed.After(scaling) && sampled[p.service] {
			newPods[p.service] = p
		}
	}
	out := &Propagation{}
	for svc := range sampled {
		for _, m := range r.cs.Members {
			if m == origin {
				continue
			}
			p, created := newPods[svc]
			w := r.imports[m]
			w.mu.Lock()
			at, arrived := w.firstReady[importKey(svc, origin, p.ip)]
			w.mu.Unlock()
			if !created || !arrived {
				out.Missing++
				continue
			}
			out.FromWatch = append(out.FromWatch, at.Sub(p.observed))
			out.FromCondition = append(out.FromCondition, at.Sub(p.condition))
		}
	}
	return out
}

// createServices writes from a few goroutines per member (setup is slow in series).
func (r *MCSRun) createServices(ctx context.Context) error {
	const writers = 8
	errs := make([]error, writers*len(r.cs.Members))
	var wg sync.WaitGroup
	for m, member := range r.cs.Members {
		c, err := r.cs.Client(member)
		if err != nil {
			return err
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: mcsNamespace}}
		if err := c.Create(ctx, ns); client.IgnoreAlreadyExists(err) != nil {
			return err
		}
		for w := range writers {
			wg.Go(func() {
				for i := w; i < r.opts.Services && errs[m*writers+w] == nil; i += writers {
					for _, obj := range exportedService(serviceName(i), r.opts.Headless) {
						if err := c.Create(ctx, obj); client.IgnoreAlreadyExists(err) != nil {
							errs[m*writers+w] = fmt.Errorf("%s: %w", member, err)
							break
						}
					}
				}
			})
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitImported waits until every member lists ready endpoints from every member for every
// Service, and each member's ServiceImports are Ready.
func (r *MCSRun) waitImported(ctx context.Context) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, r.opts.Timeout, true, func(ctx context.Context) (bool, error) {
		for _, m := range r.cs.Members {
			complete := 0
			for _, sources := range r.imports[m].readySources() {
				if len(sources) == len(r.cs.Members) {
					complete++
				}
			}
			if complete < r.opts.Services {
				r.logf("%s: %d/%d Services import endpoints from all %d clusters", m, complete, r.opts.Services, len(r.cs.Members))
				return false, nil
			}
			c, err := r.cs.Client(m)
			if err != nil {
				return false, err
			}
			list := &mcsv1beta1.ServiceImportList{}
			if err := c.List(ctx, list, client.InNamespace(mcsNamespace)); err != nil {
				return false, err
			}
			ready := 0
			for _, si := range list.Items {
				if meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) && len(si.Status.Clusters) == len(r.cs.Members) {
					ready++
				}
			}
			if ready < r.opts.Services {
				r.logf("%s: %d/%d ServiceImports Ready with all clusters", m, ready, r.opts.Services)
				return false, nil
			}
		}
		return true, nil
	})
}

// exportedService is one Pod, its Service and the ServiceExport. Bare Pods rather than a
// Deployment: at a thousand Services per member, the Deployments' and ReplicaSets' own writes
// would double the API servers' work on a 2-core machine without touching what is measured.
func exportedService(name string, headless bool) []client.Object {
	return []client.Object{
		backendPod(name, 0),
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: mcsNamespace, Name: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name}, ClusterIP: map[bool]string{true: corev1.ClusterIPNone}[headless],
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			},
		},
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: mcsNamespace, Name: name}},
	}
}

// backendPod is the i-th Pod behind the named Service.
func backendPod(service string, i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: mcsNamespace, Name: fmt.Sprintf("%s-%d", service, i), Labels: map[string]string{"app": service}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		}}},
	}
}

// LoseCluster stops the lost member's manager (stop must return once it has exited), reads its
// Lease in the broker and times, in every other member, the withdrawal of its imported slices.
func (r *MCSRun) LoseCluster(ctx context.Context, lost string, stop func() error) ([]Withdrawal, error) {
	brokerClient, err := r.cs.Client(r.cs.Broker)
	if err != nil {
		return nil, err
	}
	var withdrawals []Withdrawal
	for _, m := range r.cs.Members {
		if m != lost {
			withdrawals = append(withdrawals, Withdrawal{Member: m, SlicesBefore: r.imports[m].slicesFrom(lost)})
			r.imports[m].mu.Lock()
			delete(r.imports[m].firstGone, lost)
			r.imports[m].mu.Unlock()
		}
	}
	stopped := time.Now()
	if err := stop(); err != nil {
		return nil, fmt.Errorf("stopping %s's manager: %w", lost, err)
	}
	r.logf("stopped %s's manager in %s", lost, time.Since(stopped).Round(time.Millisecond))
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: broker.DefaultNamespace, Name: "member-" + lost}
	if err := brokerClient.Get(ctx, key, lease); err != nil {
		return nil, fmt.Errorf("reading %s's Lease: %w", lost, err)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.LeaseDurationSeconds == nil {
		return nil, fmt.Errorf("%s's Lease has no renewTime or duration", lost)
	}
	expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
	r.logf("%s's Lease expires at %s (%s after the stop)", lost, expiry.Format(time.RFC3339Nano), expiry.Sub(stopped).Round(time.Millisecond))
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, r.opts.Timeout, true, func(context.Context) (bool, error) {
		for _, w := range withdrawals {
			if r.imports[w.Member].slicesFrom(lost) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return withdrawals, fmt.Errorf("waiting for %s's slices to be withdrawn: %w", lost, err)
	}
	for i := range withdrawals {
		w := r.imports[withdrawals[i].Member]
		w.mu.Lock()
		first, gone := w.firstGone[lost], w.emptySince[lost]
		w.mu.Unlock()
		withdrawals[i].FirstAfterExpiry = first.Sub(expiry)
		withdrawals[i].AfterExpiry, withdrawals[i].AfterStop = gone.Sub(expiry), gone.Sub(stopped)
	}
	return withdrawals, nil
}

// Percentile returns the nearest-rank p-th percentile (0 < p <= 100) of ds, which it does not
// modify; 0 for no values or a p out of range.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 || !(p > 0 && p <= 100) {
		return 0
	}
	sorted := slices.Sorted(slices.Values(ds))
	rank := min(max(int(math.Ceil(p/100*float64(len(sorted)))), 1), len(sorted))
	return sorted[rank-1]
}
