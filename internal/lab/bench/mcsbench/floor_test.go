package mcsbench

import (
	"context"
	"io"
	"maps"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
	"github.com/fleetslice/fleetslice/internal/lab/lightset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// countingClient is a fake API server that counts the writes it is sent once counting is on,
// named as the bench's write table names them.
type countingClient struct {
	client.Client
	counting bool
	// mu guards writes: a floor's jobs write in parallel.
	mu     sync.Mutex
	writes map[apimetrics.Write]int
}

func newCountingClient(t *testing.T) *countingClient {
	scheme, err := testenv.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	c := &countingClient{writes: map[apimetrics.Write]int{}}
	count := func(obj client.Object, verb, sub string) {
		if !c.counting {
			return
		}
		gvk, err := apiutil.GVKForObject(obj, scheme)
		if err != nil {
			t.Error(err) // on a job's goroutine: Fatal must not run there
			return
		}
		resource := map[string]string{"Service": "services", "ServiceImport": "serviceimports", "ServiceExport": "serviceexports",
			"EndpointSlice": "endpointslices", "ServiceExportRecord": "serviceexportrecords"}[gvk.Kind]
		if sub != "" {
			resource += "/" + sub
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.writes[apimetrics.Write{Resource: resource, Verb: verb}]++
	}
	c.Client = fake.NewClientBuilder().WithScheme(scheme).
		WithStatusSubresource(&mcsv1beta1.ServiceImport{}, &mcsv1beta1.ServiceExport{}).
		WithInterceptorFuncs(interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				count(obj, "create", "")
				return c.Create(ctx, obj, opts...)
			},
			Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
				count(obj, "update", "")
				return c.Update(ctx, obj, opts...)
			},
			SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
				count(obj, "update", sub)
				return c.SubResource(sub).Update(ctx, obj, opts...)
			},
		}).Build()
	return c
}

// floorWrites runs a floor's jobs against fake API servers (broker first) and returns the
// writes each was sent, after the untimed objects the phase starts from.
func floorWrites(t *testing.T, members, services int, work floorWork) []map[apimetrics.Write]int {
	t.Helper()
	f := &fleet{o: fleetOptions{members: members, services: services, log: io.Discard}, set: &lightset.Set{}}
	var clients []*countingClient
	var asClients []client.Client
	for m := range members + 1 {
		c := newCountingClient(t)
		clients, asClients = append(clients, c), append(asClients, c)
		if m > 0 {
			f.set.IDs = append(f.set.IDs, lightset.MemberID(m-1))
			f.set.Members = append(f.set.Members, &testenv.Cluster{Client: c})
		}
	}
	ctx := context.Background()
	if err := f.populate(ctx); err != nil {
		t.Fatal(err)
	}
	jobs, err := f.floorJobs(ctx, asClients, "floor", work)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range clients {
		c.counting = true
	}
	if _, err := runAll(ctx, asClients, jobs); err != nil {
		t.Fatal(err)
	}
	var out []map[apimetrics.Write]int
	for _, c := range clients {
		out = append(out, c.writes)
	}
	return out
}

// The floors write what fleetslice writes in the same phase, by kind, so that a ratio to them
// compares the same work: IPAddresses and Lease renewals aside, which the API server and the
// managers' liveness add on their own.
func TestFloorsWriteWhatFleetsliceWritesInTheSamePhase(t *testing.T) {
	const members, services = 3, 4
	memberBulk := maps.Clone(memberBulkWrites(services).Served)
	delete(memberBulk, apimetrics.Write{Resource: "ipaddresses", Verb: "create"})
	delete(memberBulk, apimetrics.Write{Resource: "leases", Verb: "update"})
	broker := func(exporters int) map[apimetrics.Write]int {
		return map[apimetrics.Write]int{
			{Resource: "serviceexportrecords", Verb: "create"}: exporters * services,
			{Resource: "endpointslices", Verb: "create"}:       exporters * services,
		}
	}
	joiner := maps.Clone(memberBulk)
	delete(joiner, apimetrics.Write{Resource: "serviceexports/status", Verb: "update"})
	peer := map[apimetrics.Write]int{
		{Resource: "endpointslices", Verb: "create"}:        services,
		{Resource: "serviceimports/status", Verb: "update"}: services,
	}
	tests := []struct {
		name string
		work floorWork
		want []map[apimetrics.Write]int
	}{
		{name: "bulk start", work: bulkFloor(members), want: []map[apimetrics.Write]int{broker(members), memberBulk, memberBulk, memberBulk}},
		{name: "the last member rejoins", work: joinFloor(members, members-1), want: []map[apimetrics.Write]int{broker(1), peer, peer, joiner}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := floorWrites(t, members, services, tt.work)
			for i := range tt.want {
				if !maps.Equal(got[i], tt.want[i]) {
					t.Errorf("API server %d: writes %v, want %v", i, got[i], tt.want[i])
				}
			}
		})
	}
}
