package mcsbench

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
)

// floorWriters is how many requests each API server is sent at once while the floor is timed:
// enough to keep a control plane on this machine busy, as the managers' workers together do.
const floorWriters = 16

// floorWork is what one phase makes a set write to converge, counted per API server: a write
// floor is the time these writes take from plain clients without a rate limit.
type floorWork struct {
	// exporters lists, per member, the members whose exports it imports (its imported slices
	// and ServiceImport status name them); publishing says which members' exports the broker
	// gets (their records and slice copies); exportStatus which members write their exports'
	// status (a member that rejoins keeps the status it had).
	exporters    [][]int
	publishing   []bool
	exportStatus []bool
	// importsExist marks members whose ServiceImports and derived Services exist already (a
	// peer of a joining member): they add the newcomer's slices and name it in each import's
	// status, one update each.
	importsExist []bool
}

// bulkFloor is the converged set of a bulk start: every member imports every member's export.
func bulkFloor(members int) floorWork {
	w := floorWork{publishing: make([]bool, members), exportStatus: make([]bool, members), importsExist: make([]bool, members)}
	all := allMembers(members)
	for m := range members {
		w.publishing[m], w.exportStatus[m] = true, true
		w.exporters = append(w.exporters, all)
	}
	return w
}

// joinFloor is what a member rejoining a running set makes the set write: its own imports of
// every member's exports and its exports in the broker; each peer's imported slice of them and
// its import's status naming the newcomer. The newcomer's exports keep the status they had
// before it left, so neither fleetslice nor the floor writes it again.
func joinFloor(members, joiner int) floorWork {
	w := floorWork{publishing: make([]bool, members), exportStatus: make([]bool, members), importsExist: make([]bool, members)}
	all := allMembers(members)
	for m := range members {
		w.importsExist[m] = m != joiner
	}
	w.publishing[joiner] = true
	for m := range members {
		if m == joiner {
			w.exporters = append(w.exporters, all)
		} else {
			w.exporters = append(w.exporters, []int{joiner})
		}
	}
	return w
}

// measureFloor creates, in a namespace of its own in every API server, the objects of work for
// every Service, all API servers at once, and returns how long that took. It runs while no
// manager does (they would import, or tear down, what it writes) and deletes what it wrote
// afterwards, untimed. It also returns the CPU every API server and etcd used meanwhile.
func (f *fleet) measureFloor(ctx context.Context, namespace string, work floorWork) (took, cpu time.Duration, err error) {
	clients, err := f.floorClients(ctx, namespace)
	if err != nil {
		return 0, 0, err
	}
	jobs, err := f.floorJobs(ctx, clients, namespace, work)
	if err != nil {
		return 0, 0, err
	}
	cpuBefore, err := f.controlPlanesCPU()
	if err != nil {
		return 0, 0, err
	}
	profile, err := f.startProfile(ctx, namespace, 10, "")
	if err != nil {
		return 0, 0, err
	}
	busy := sampleBusy(ctx)
	if took, err = runAll(ctx, clients, jobs); err != nil {
		return 0, 0, err
	}
	f.logf("%s: the machine's CPUs were busy %s", namespace, busy.finish())
	if err := profile.finish(ctx); err != nil {
		return 0, 0, err
	}
	if cpu, err = f.controlPlanesCPU(); err != nil {
		return 0, 0, err
	}
	cpu -= cpuBefore
	f.logf("write floor in %s: %s, %s of control-plane CPU", namespace, took.Round(time.Millisecond), cpu.Round(100*time.Millisecond))
	return took, cpu, cleanFloor(ctx, clients, namespace)
}

// floorClients are clients of every API server (broker first) without a rate limit, and the
// namespace the floor writes in, created in each.
func (f *fleet) floorClients(ctx context.Context, namespace string) ([]client.Client, error) {
	clusters := f.clusters()
	clients := make([]client.Client, len(clusters))
	for i, c := range clusters {
		cfg := rest.CopyConfig(c.Config)
		cfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
		var err error
		if clients[i], err = client.New(cfg, client.Options{Scheme: c.Client.Scheme()}); err != nil {
			return nil, err
		}
		if err := clients[i].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	return clients, nil
}

// runAll runs each API server's jobs (jobs[i] through clients[i]), all API servers at once, and
// returns how long that took.
func runAll(ctx context.Context, clients []client.Client, jobs [][]floorJob) (time.Duration, error) {
	began := time.Now()
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() { errs[i] = runJobs(ctx, clients[i], jobs[i]) })
	}
	wg.Wait()
	return time.Since(began), errors.Join(errs...)
}

type floorJob func(ctx context.Context, c client.Client) error

func runJobs(ctx context.Context, c client.Client, jobs []floorJob) error {
	next := make(chan floorJob)
	errs := make([]error, floorWriters)
	var wg sync.WaitGroup
	for w := range floorWriters {
		wg.Go(func() {
			for job := range next {
				if errs[w] == nil {
					errs[w] = job(ctx, c)
				}
			}
		})
	}
	for _, j := range jobs {
		next <- j
	}
	close(next)
	wg.Wait()
	return errors.Join(errs...)
}

// cleanFloor deletes what the floor wrote; light members run no namespace controller, so each
// kind is deleted by collection.
func cleanFloor(ctx context.Context, clients []client.Client, namespace string) error {
	var errs []error
	for _, c := range clients {
		for _, obj := range []client.Object{&discoveryv1.EndpointSlice{}, &mcsv1beta1.ServiceImport{}, &mcsv1beta1.ServiceExport{}, &v1alpha1.ServiceExportRecord{}} {
			// Members have no record type and the broker no multi-cluster types.
			if err := c.DeleteAllOf(ctx, obj, client.InNamespace(namespace)); !meta.IsNoMatchError(err) {
				errs = append(errs, client.IgnoreNotFound(err))
			}
		}
		var services corev1.ServiceList
		if err := c.List(ctx, &services, client.InNamespace(namespace)); err != nil {
			errs = append(errs, err)
			continue
		}
		for i := range services.Items {
			errs = append(errs, client.IgnoreNotFound(c.Delete(ctx, &services.Items[i])))
		}
	}
	return errors.Join(errs...)
}
