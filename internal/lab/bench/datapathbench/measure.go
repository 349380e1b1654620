package datapathbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// Names in both members: the sampled Service, its Pods' app label and the client Pods.
const (
	namespace = "latency"
	service   = "probe"
	basePod   = "probe-base"
	clientPod = "client"
)

// setup sizes one measurement.
type setup struct {
	// services are the sizes measured, ascending: the exported Services the ClusterSet holds.
	services []int
	samples  int
	nodes    int
	// pause is the requesters' wait between two requests; quiet is how long no request may reach
	// a not-ready Pod before it counts as stopped.
	pause, quiet time.Duration
	timeout      time.Duration
	// answerTimeout bounds each wait for a client to see a change; a change not seen by then
	// counts as missing.
	answerTimeout time.Duration
	binDir        string
	workdir       string
	log           io.Writer
}

// pathFigures are one client's view across the samples of one size.
type pathFigures struct {
	// Ready: from the Pod's Ready write until the client's first request it answered started.
	// Stopped: from its not-ready write until the first request after its last answer started.
	Ready, Stopped               []time.Duration
	MissingReady, MissingStopped int
	Requests, Failed             int
}

// sizeFigures are one size's figures: the exporting member's own client through the Service's
// ClusterIP (in-cluster) and the importing member's client through the ClusterSet IP.
type sizeFigures struct {
	Services int
	// Settled is how long the importing member took to hold every import with its ClusterSet IP
	// and imported slices after the exporter created the Services added for this size.
	Settled                 time.Duration
	InCluster, CrossCluster pathFigures
}

// world is a running ClusterSet with the pod network, the sampled Service and both clients.
type world struct {
	s                  setup
	cs                 *localset.ClusterSet
	pn                 *localset.PodNetwork
	exporter, importer string
	exp, imp           client.Client
	trans              *transitions
	flags              string
	inCluster, across  *requester
	stopRequests       context.CancelFunc
	background         int
}

// measure brings up a two-member ClusterSet with a pod network, samples every size and tears
// everything down again, also on failure.
func measure(ctx context.Context, s setup) (figs []sizeFigures, err error) {
	cs, err := localset.Up(ctx, localset.Options{Workdir: s.workdir, Clusters: 2, NodesPerCluster: s.nodes, PodNetwork: true, Log: s.log})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, localset.Remove(context.WithoutCancel(ctx), cs.Workdir, s.log)) }()
	for _, m := range cs.Members {
		p, err := cs.StartManager(m, s.binDir)
		if err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, p.Describe(20))
			}
			err = errors.Join(err, p.Stop(10*time.Second))
		}()
	}
	pn, err := cs.StartPodNetwork(context.WithoutCancel(ctx), s.binDir, s.log)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, pn.Stop()) }()
	w, err := start(ctx, s, cs, pn)
	if err != nil {
		return nil, err
	}
	defer w.close()
	for _, n := range s.services {
		f := sizeFigures{Services: n}
		if f.Settled, err = w.grow(ctx, n); err != nil {
			return figs, fmt.Errorf("%d exported Services: %w", n, err)
		}
		fmt.Fprintf(s.log, "datapath: %d exported Services imported in %s; sampling %d Pods\n", n, f.Settled.Round(time.Second), s.samples)
		for k := range s.samples {
			if err := w.sample(ctx, fmt.Sprintf("probe-%d-%d", n, k), &f); err != nil {
				return figs, fmt.Errorf("%d exported Services, sample %d: %w", n, k, err)
			}
		}
		figs = append(figs, f)
	}
	return figs, nil
}

// start creates the sampled Service in the exporter with one Pod that stays ready, exports it,
// runs a client Pod in each member and starts both clients' requests once both reach the Pod.
func start(ctx context.Context, s setup, cs *localset.ClusterSet, pn *localset.PodNetwork) (w *world, err error) {
	w = &world{s: s, cs: cs, pn: pn, exporter: cs.Members[0], importer: cs.Members[1]}
	if w.exp, err = cs.Client(w.exporter); err != nil {
		return nil, err
	}
	if w.imp, err = cs.Client(w.importer); err != nil {
		return nil, err
	}
	cfg, err := cs.RESTConfig(w.exporter)
	if err != nil {
		return nil, err
	}
	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if w.flags, err = os.MkdirTemp("", "fleetslice-bench-datapath-"); err != nil {
		return nil, err
	}
	for _, c := range []client.Client{w.exp, w.imp} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: objectMeta("", namespace)}); err != nil {
			return w, err
		}
		if err := c.Create(ctx, sleeper()); err != nil {
			return w, err
		}
	}
	if w.trans, err = watchTransitions(ctx, clientset, namespace); err != nil {
		return w, err
	}
	svc := &corev1.Service{ObjectMeta: objectMeta(namespace, service), Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": service},
		Ports:    []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	for _, obj := range []client.Object{echoPod(basePod, ""), svc, serviceExport(service)} {
		if err := w.exp.Create(ctx, obj); err != nil {
			return w, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	clusterIP, clusterSetIP, err := w.addresses(ctx)
	if err != nil {
		return w, err
	}
	reqCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w.stopRequests = stop
	for _, side := range []struct {
		member, ip string
		into       **requester
	}{{w.exporter, clusterIP, &w.inCluster}, {w.importer, clusterSetIP, &w.across}} {
		sb, err := poll(ctx, func() (string, bool) {
			sb, ok := pn.Runtimes[side.member].Sandbox(namespace, clientPod)
			if !ok {
				return "", false
			}
			return sb.Netns, true
		})
		if err != nil {
			return w, fmt.Errorf("the client Pod of %s never ran: %w", side.member, err)
		}
		*side.into = &requester{netns: sb, addr: net.JoinHostPort(side.ip, "80"), pause: s.pause}
		go (*side.into).run(reqCtx)
	}
	began := time.Now()
	for _, r := range []*requester{w.inCluster, w.across} {
		if _, err := poll(ctx, func() (time.Time, bool) { return firstAnswer(r.since(began), basePod) }); err != nil {
			return w, fmt.Errorf("no answer from %s at %s: %w", basePod, r.addr, err)
		}
	}
	return w, nil
}

// addresses waits for the sampled Service's ClusterIP in the exporter and its ClusterSet IP in
// the importer.
func (w *world) addresses(ctx context.Context) (clusterIP, clusterSetIP string, err error) {
	clusterIP, err = poll(ctx, func() (string, bool) {
		var svc corev1.Service
		err := w.exp.Get(ctx, client.ObjectKey{Namespace: namespace, Name: service}, &svc)
		return svc.Spec.ClusterIP, err == nil && svc.Spec.ClusterIP != ""
	})
	if err != nil {
		return "", "", fmt.Errorf("the Service has no ClusterIP: %w", err)
	}
	clusterSetIP, err = poll(ctx, func() (string, bool) {
		imp := serviceImport()
		err := w.imp.Get(ctx, client.ObjectKeyFromObject(imp), imp)
		if err != nil || len(imp.Spec.IPs) == 0 {
			return "", false
		}
		return imp.Spec.IPs[0], true
	})
	if err != nil {
		return "", "", fmt.Errorf("%s has no ClusterSet IP for the Service: %w", w.importer, err)
	}
	return clusterIP, clusterSetIP, nil
}

func (w *world) close() {
	if w.stopRequests != nil {
		w.stopRequests()
	}
	if w.trans != nil {
		w.trans.close()
	}
	if w.flags != "" {
		os.RemoveAll(w.flags)
	}
}

// poll calls f every 100 ms until it is done or ctx ends.
func poll[T any](ctx context.Context, f func() (T, bool)) (T, error) {
	for {
		if v, ok := f(); ok {
			return v, nil
		}
		select {
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// pollFor is poll bounded by timeout.
func pollFor[T any](ctx context.Context, timeout time.Duration, f func() (T, bool)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return poll(ctx, f)
}

// flag is the file whose presence fails a sampled Pod's readiness probe.
func (w *world) flag(pod string) string { return filepath.Join(w.flags, pod) }
