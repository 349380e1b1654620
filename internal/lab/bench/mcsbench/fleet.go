package mcsbench

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
)

// fleetNamespace holds every Service of the fleet measurement, in every member.
const fleetNamespace = "fleet"

// fleetOptions size one fleet measurement on light members.
type fleetOptions struct {
	members, services int
	// samples single changes are timed on the running set, joinSamples while a member joins.
	samples, joinSamples int
	lease, changeEvery   time.Duration
	// restartQuiet is how long writes are counted after every restarted manager renewed its Lease.
	restartQuiet time.Duration
	timeout      time.Duration
	managerArgs  []string
	manager      string
	log          io.Writer
	seed         uint64

	// changes are made in the members while the broker is down for outage.
	changes int
	outage  time.Duration

	// profileDir, when set, receives CPU profiles and request counts of the bulk start, the
	// join and their write floors, and the managers' logs.
	profileDir string
	// logsDir, when set, keeps the set's logs (managers, API servers), in a folder named after
	// the size.
	logsDir string
}

// keptLogs is where the set's logs are kept once the set is gone ("": nowhere).
func (o fleetOptions) keptLogs() string {
	switch {
	case o.logsDir != "":
		return filepath.Join(o.logsDir, fmt.Sprintf("%dx%d", o.members, o.services))
	case o.profileDir != "":
		return filepath.Join(o.profileDir, "logs")
	}
	return ""
}

// fleet is one running measurement.
type fleet struct {
	o     fleetOptions
	set   *lightset.Set
	views []*memberView
	res   *fleetResult
}

func (f *fleet) logf(format string, args ...any) {
	fmt.Fprintf(f.o.log, "[fleet %dx%d] "+format+"\n", append([]any{f.o.members, f.o.services}, args...)...)
}

// measureFleet runs every phase on a fresh light ClusterSet and tears it down, also on failure.
func measureFleet(ctx context.Context, o fleetOptions) (res *fleetResult, err error) {
	workdir, err := os.MkdirTemp("", "fleetslice-bench-fleet-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(workdir)
	if kept := o.keptLogs(); kept != "" {
		// The managers' logs time each one's first writes and say what they waited for.
		defer func() {
			err = errors.Join(err, os.CopyFS(kept, os.DirFS(filepath.Join(workdir, "logs"))))
		}()
	}
	began := time.Now()
	set, err := lightset.Start(ctx, lightset.Options{Members: o.members, Workdir: workdir, Manager: o.manager, Lease: o.lease, ManagerArgs: o.managerArgs, Pprof: o.profileDir != ""})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, set.Stop()) }()
	f := &fleet{o: o, set: set, res: &fleetResult{Members: o.members, Services: o.services, Lease: cmp.Or(o.lease, multicluster.DefaultLeaseDuration), Outage: o.outage}}
	f.logf("control planes up in %s", time.Since(began).Round(time.Millisecond))
	watchCtx, stopWatches := context.WithCancel(ctx)
	defer stopWatches()
	for _, m := range set.Members {
		v, err := watchMember(watchCtx, m.Config, fleetNamespace)
		if err != nil {
			return nil, err
		}
		f.views = append(f.views, v)
	}
	if err := f.populate(ctx); err != nil {
		return nil, fmt.Errorf("creating the workload: %w", err)
	}
	phases := []struct {
		name string
		run  func(context.Context) error
	}{
		{"write floors", f.floors},
		{"bulk start", f.bulkStart},
		{"restart", f.restart},
		{"propagation", f.propagate},
		{"lost member", f.loseMember},
		{"join", f.join},
		{"broker comeback", f.brokerComeback},
		{"member API server restart", f.memberRestart},
	}
	for _, p := range phases {
		if err := p.run(ctx); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, errors.Join(err, set.ManagersRunning()))
		}
	}
	f.res.Wall = time.Since(began)
	return f.res, nil
}

func fleetService(i int) string { return fmt.Sprintf("svc-%04d", i) }

// memberAddress is the i-th Service's address number n (0 or 1) in member m: distinct across
// the set.
func memberAddress(m, i, n int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+m, 100*n+i/250, 1+i%250)
}

// populate writes, in every member, the namespace and per Service a selector-less Service, one
// EndpointSlice with one ready endpoint, and a ServiceExport, from a few writers per member.
func (f *fleet) populate(ctx context.Context) error {
	const writers = 8
	began := time.Now()
	errs := make([]error, len(f.set.Members)*writers)
	var wg sync.WaitGroup
	for m, member := range f.set.Members {
		if err := member.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNamespace}}); err != nil {
			return err
		}
		for w := range writers {
			wg.Go(func() {
				for i := w; i < f.o.services && errs[m*writers+w] == nil; i += writers {
					for _, obj := range fleetObjects(i, memberAddress(m, i, 0)) {
						if err := member.Client.Create(ctx, obj); err != nil {
							errs[m*writers+w] = fmt.Errorf("%s: %w", f.set.IDs[m], err)
							break
						}
					}
				}
			})
		}
	}
	wg.Wait()
	f.logf("wrote %d Services, slices and exports per member in %s", f.o.services, time.Since(began).Round(time.Millisecond))
	return errors.Join(errs...)
}

func fleetObjects(i int, address string) []client.Object {
	name := fleetService(i)
	return []client.Object{
		&corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		},
		fleetSlice(name, address),
		&mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: name}},
	}
}

// fleetSlice is the benchmark's own EndpointSlice of a selector-less Service.
func fleetSlice(service string, addresses ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleetNamespace, Name: service + "-bench", Labels: map[string]string{
			discoveryv1.LabelServiceName: service, discoveryv1.LabelManagedBy: "bench.fleetslice.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, a := range addresses {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{a},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			Zone:       ptr.To("zone-a"),
		})
	}
	return s
}

// waitComplete waits until every member imports every Service from each of sources.
func (f *fleet) waitComplete(ctx context.Context, sources []string) error {
	last := time.Time{}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, f.o.timeout, true, func(context.Context) (bool, error) {
		if err := f.set.ManagersRunning(); err != nil {
			return false, err
		}
		done := true
		progress := ""
		for i, v := range f.views {
			n := v.complete(sources)
			done = done && n == f.o.services
			progress += fmt.Sprintf(" %s:%d", f.set.IDs[i], n)
		}
		if !done && time.Since(last) > 5*time.Second {
			f.logf("complete imports per member:%s (of %d)", progress, f.o.services)
			last = time.Now()
		}
		return done, nil
	})
}

// snapshot reads every API server's write counters, the broker first.
func (f *fleet) snapshot(ctx context.Context) ([]apimetrics.Writes, error) {
	out := []apimetrics.Writes{}
	for _, c := range f.clusters() {
		raw, err := apimetrics.Scrape(ctx, c.Config)
		if err != nil {
			return nil, err
		}
		w, err := apimetrics.CountWrites(raw, nil)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// since is the writes each API server served since before.
func (f *fleet) since(ctx context.Context, before []apimetrics.Writes) ([]apimetrics.Writes, error) {
	now, err := f.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for i := range now {
		now[i] = now[i].Sub(before[i])
	}
	return now, nil
}

// settle waits until no API server served a write other than a Lease renewal for quiet, and
// returns the writes since before.
func (f *fleet) settle(ctx context.Context, before []apimetrics.Writes, quiet time.Duration) ([]apimetrics.Writes, error) {
	return f.settleWith(ctx, func(ctx context.Context) ([]apimetrics.Writes, error) { return f.since(ctx, before) }, quiet)
}

// settleWith is settle with the writes counted by count.
func (f *fleet) settleWith(ctx context.Context, count func(context.Context) ([]apimetrics.Writes, error), quiet time.Duration) ([]apimetrics.Writes, error) {
	var last []apimetrics.Writes
	lastChange := time.Now()
	err := wait.PollUntilContextTimeout(ctx, time.Second, f.o.timeout, true, func(ctx context.Context) (bool, error) {
		now, err := count(ctx)
		if err != nil {
			return false, err
		}
		if last == nil || nonLeaseTotal(now) != nonLeaseTotal(last) {
			last, lastChange = now, time.Now()
		}
		return time.Since(lastChange) >= quiet, nil
	})
	return last, err
}

func nonLeaseTotal(ws []apimetrics.Writes) int {
	n := 0
	for _, w := range ws {
		n += withoutLeases(w).Total()
	}
	return n
}

// withoutLeases drops Lease renewals, which a live member makes whatever else happens.
func withoutLeases(w apimetrics.Writes) apimetrics.Writes { return w.Without("leases") }

// sampleServices picks n distinct Services with the measurement's seed.
func (f *fleet) sampleServices(n int, salt uint64) []int {
	rng := rand.New(rand.NewPCG(f.o.seed, salt))
	return rng.Perm(f.o.services)[:min(n, f.o.services)]
}
