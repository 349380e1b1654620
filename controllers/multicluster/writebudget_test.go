package multicluster_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/pkg/clustersettest"
)

// importWriteBudget is what one member writes to its own API server per imported Service in a
// bulk start: every member exporting every Service, nothing conflicting, the controllers started
// once the exports exist. Lease renewals are left out (a live member makes them whatever else
// happens). A write kind missing here, or more of one, fails the test: a new write per import
// multiplies by every Service of every member of a fleet, so it must be a decision, made here.
var importWriteBudget = map[apimetrics.Write]float64{
	// One imported slice per exporting cluster.
	{Resource: "endpointslices", Verb: "create"}: 3,
	// The derived Service and the ClusterSet IP the API server allocates for it.
	{Resource: "services", Verb: "create"}: 1,
	// The API server's repair loop, racing a new Service, now and then allocates one again.
	{Resource: "ipaddresses", Verb: "create"}: 1.1,
	// The ServiceImport, created after the derived Service with its IPs: no second spec write.
	{Resource: "serviceimports", Verb: "create"}: 1,
	// The import's status names its exporters. New imports wait for members still publishing
	// the exports they started with (Options.InitialExportsWait), so it is written once with
	// all of them (1.00 to 1.02 here; 1.15 to 1.55 before the wait, as each exporter's record
	// arrived at its own time).
	{Resource: "serviceimports/status", Verb: "update"}: 1.1,
	// The member's own export's conditions: Valid, Ready and Conflict in one write (1.00 here),
	// never again from a cache that does not show it yet.
	{Resource: "serviceexports/status", Verb: "update"}: 1.1,
	// No Events: an import or export that simply appeared is announced by its status alone.
}

// conflictBudget bounds the writes per import refused with 409 Conflict, all kinds together:
// retries of syncs that ran on a cache behind their own writes. They were 0.1 to 0.65 per
// import here, almost all ServiceExport status writes made from the export as it was before
// the last one; with those held back (writtenSlices.objects) 0.00 to 0.07 are left, import
// status writes racing a late exporter's record.
const conflictBudget = 0.25

// writeBudgetServices is the number of Services every member exports: enough that a write made
// for a few of them only (a retry, a conflict) stays below the budget's fractions.
const writeBudgetServices = 40

// TestImportWritesStayWithinTheBudget starts three members that each export the same Services,
// counts at each member's API server what the controllers write until the ClusterSet has
// converged, and holds it to importWriteBudget.
func TestImportWritesStayWithinTheBudget(t *testing.T) {
	if _, err := k8sbin.Dir(k8sbin.Etcd, k8sbin.KubeAPIServer); err != nil {
		t.Skipf("envtest binaries: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	members := []string{"cluster-a", "cluster-b", "cluster-c"}
	// A lease long enough that no member is judged lost while restartWritesNothing has every
	// member's controllers stopped at once: the restart must change nothing.
	cs, err := clustersettest.Start(ctx, clustersettest.Options{Members: members, WithoutEndpointSliceController: true,
		LeaseDuration: time.Minute, RenewInterval: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cs.Stop(); err != nil {
			t.Error(err)
		}
	}()
	for _, m := range cs.Members {
		if err := m.StopControllers(); err != nil {
			t.Fatal(err)
		}
	}
	ns, err := cs.CreateNamespace(ctx, "budget")
	if err != nil {
		t.Fatal(err)
	}
	for i, m := range cs.Members {
		for s := range writeBudgetServices {
			for _, obj := range exportedService(ns, fmt.Sprintf("svc-%02d", s), i) {
				if err := m.Client.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	before := make([]apimetrics.Writes, len(cs.Members))
	for i, m := range cs.Members {
		if before[i], err = memberWrites(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	// The package's other tests' managers counted into the same registry before this one.
	syncsBefore := syncCounts(t)
	if err := cs.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range cs.Members {
		if err := waitConverged(ctx, m, ns, len(members)); err != nil {
			t.Fatal(err)
		}
	}
	if syncs := logSyncs(t, "bulk start", syncsBefore); syncs["multicluster-import"] > importSyncBudget*writeBudgetServices*float64(len(cs.Members)) {
		t.Errorf("%.0f import syncs for %d imports, above %.1f each", syncs["multicluster-import"], writeBudgetServices*len(cs.Members), importSyncBudget)
	}
	for i, m := range cs.Members {
		after, err := settledWrites(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		writes := after.Sub(before[i]).Without("leases")
		perImport := map[apimetrics.Write]float64{}
		conflicts := 0
		for w, n := range writes.Served {
			// A write refused with 409 (a sync that read a cache behind its own last write) is
			// retried, not a write of its own: it is held to conflictBudget below instead.
			n -= writes.Conflicts[w]
			conflicts += writes.Conflicts[w]
			if w.Resource == "events" {
				// The API server records events of its own (its ClusterIP repair loop, racing
				// new Services); only the controllers' own count, read from the events.
				n = ourEvents(ctx, t, m, ns)
			}
			if n > 0 {
				perImport[w] = float64(n) / writeBudgetServices
			}
		}
		refused := map[apimetrics.Write]float64{}
		for w, n := range writes.Conflicts {
			if n > 0 {
				refused[w] = float64(n) / writeBudgetServices
			}
		}
		t.Logf("%s writes per imported Service: %s; %d refused with a conflict (%s)", m.Name, formatWrites(perImport), conflicts, formatWrites(refused))
		if per := float64(conflicts) / writeBudgetServices; per > conflictBudget {
			t.Errorf("%s: %.2f writes per import refused with a conflict, above %.2f", m.Name, per, conflictBudget)
		}
		for _, w := range slices.SortedFunc(maps.Keys(perImport), compareWrites) {
			budget, ok := importWriteBudget[w]
			switch {
			case !ok:
				t.Errorf("%s: a write not in the budget: %s %s, %.2f per import", m.Name, w.Verb, w.Resource, perImport[w])
			case perImport[w] > budget:
				t.Errorf("%s: %s %s %.2f per import, above its budget of %.2f", m.Name, w.Verb, w.Resource, perImport[w], budget)
			}
		}
	}
	restartWritesNothing(ctx, t, cs)
}

// restartWritesNothing restarts every member's controllers on the converged ClusterSet, as an
// upgrade does, and holds them to no write at all (Lease renewals aside): a restart finds every
// object as it wants it, and a write here would be paid for every import of every member.
func restartWritesNothing(ctx context.Context, t *testing.T, cs *clustersettest.ClusterSet) {
	t.Helper()
	before := make([]apimetrics.Writes, len(cs.Members))
	for _, m := range cs.Members {
		if err := m.StopControllers(); err != nil {
			t.Fatal(err)
		}
	}
	for i, m := range cs.Members {
		var err error
		if before[i], err = settledWrites(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.StartControllers(ctx); err != nil {
		t.Fatal(err)
	}
	// Give the new managers' first reconciles of every import and export time to run.
	time.Sleep(3 * time.Second)
	for i, m := range cs.Members {
		after, err := settledWrites(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if writes := after.Sub(before[i]).Without("leases"); writes.Total() > 0 {
			t.Errorf("%s: a restart on a converged ClusterSet wrote %v", m.Name, writes.Served)
		}
	}
}

// ourEvents counts the events fleetslice's controllers recorded in the namespace; each is named
// when there are any, to say what was announced.
func ourEvents(ctx context.Context, t *testing.T, m *clustersettest.Member, ns string) int {
	var list eventsv1.EventList
	if err := m.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if strings.HasPrefix(e.ReportingController, "fleetslice") {
			t.Logf("%s: event %s on %s %s: %s", m.Name, e.Reason, e.Regarding.Kind, e.Regarding.Name, e.Note)
			n++
		}
	}
	return n
}

// exportedService is a selector-less Service with one ready endpoint in a slice of its own, as
// member i would export it.
func exportedService(ns, name string, i int) []client.Object {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-own", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "budget.test",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{fmt.Sprintf("10.%d.0.%d", 10+i, 10+len(name))},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
	}
	return []client.Object{svc, slice, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}
}

func memberWrites(ctx context.Context, m *clustersettest.Member) (apimetrics.Writes, error) {
	raw, err := apimetrics.Scrape(ctx, m.Config)
	if err != nil {
		return apimetrics.Writes{}, err
	}
	return apimetrics.CountWrites(raw, nil)
}

// waitConverged waits until the member imports every Service from every exporter: a ServiceImport
// with its ClusterSet IP and all exporters in its status, and one imported slice per exporter.
func waitConverged(ctx context.Context, m *clustersettest.Member, ns string, exporters int) error {
	for ctx.Err() == nil {
		var imports mcsv1beta1.ServiceImportList
		var slices discoveryv1.EndpointSliceList
		if m.Client.List(ctx, &imports, client.InNamespace(ns)) == nil &&
			m.Client.List(ctx, &slices, client.InNamespace(ns), client.HasLabels{mcsv1beta1.LabelServiceName}) == nil {
			done := 0
			for _, si := range imports.Items {
				if len(si.Spec.IPs) > 0 && len(si.Status.Clusters) == exporters {
					done++
				}
			}
			if done == writeBudgetServices && len(slices.Items) == writeBudgetServices*exporters {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s did not import all %d Services from %d exporters: %w", m.Name, writeBudgetServices, exporters, ctx.Err())
}

// settledWrites reads the member's writes once they have stopped growing for two seconds (Lease
// renewals aside), so that a write still on its way after convergence is counted too.
func settledWrites(ctx context.Context, m *clustersettest.Member) (apimetrics.Writes, error) {
	var last apimetrics.Writes
	lastTotal, stableSince := -1, time.Now()
	for ctx.Err() == nil {
		w, err := memberWrites(ctx, m)
		if err != nil {
			return w, err
		}
		total := w.Without("leases").Total()
		if total != lastTotal {
			lastTotal, stableSince, last = total, time.Now(), w
		} else if time.Since(stableSince) >= 2*time.Second {
			return last, nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	return last, ctx.Err()
}

func compareWrites(a, b apimetrics.Write) int {
	return strings.Compare(a.Resource+" "+a.Verb, b.Resource+" "+b.Verb)
}

func formatWrites(per map[apimetrics.Write]float64) string {
	var parts []string
	total := 0.0
	for _, w := range slices.SortedFunc(maps.Keys(per), compareWrites) {
		parts = append(parts, fmt.Sprintf("%s %s %.2f", w.Resource, w.Verb, per[w]))
		total += per[w]
	}
	return fmt.Sprintf("%.2f in all: %s", total, strings.Join(parts, ", "))
}

// importSyncBudget bounds an import's syncs in the bulk start, most of which write nothing:
// about 5 each (586 to 607 for 120 imports in eight runs) since a peer's slice copy enqueues the
// import only once the peer's record is cached; 7.8 before (940), when every copy ran one.
const importSyncBudget = 6.5

// logSyncs logs and returns how many syncs each controller of every member ran since before
// (the members share controller-runtime's metrics registry): the writes are budgeted, and the
// syncs that write nothing are what this shows.
func logSyncs(t *testing.T, when string, before map[string]float64) map[string]float64 {
	t.Helper()
	syncs := syncCounts(t)
	var out []string
	for _, name := range slices.Sorted(maps.Keys(syncs)) {
		syncs[name] -= before[name]
		out = append(out, fmt.Sprintf("%s %.0f", name, syncs[name]))
	}
	t.Logf("syncs in the %s, all members: %s", when, strings.Join(out, ", "))
	return syncs
}

// syncCounts reads every controller's syncs so far from controller-runtime's metrics registry.
func syncCounts(t *testing.T) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	syncs := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					syncs[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return syncs
}
