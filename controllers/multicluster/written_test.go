package multicluster

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/multicluster/merge"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/controllers/slicewrite"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// cachedBroker reads from a cache the test moves on by hand and writes to the API server, as a
// controller-runtime client of an informer cache does.
type cachedBroker struct {
	client.Client // the API server
	mu            sync.Mutex
	cache         client.Client
	writes        []string
	// caches builds the cache again from the API server's objects (nil: brokerFake's indexes).
	caches func(t *testing.T, objs ...client.Object) client.WithWatch
}

func (c *cachedBroker) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache.Get(ctx, key, obj, opts...)
}

func (c *cachedBroker) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache.List(ctx, list, opts...)
}

// recording has the API server note every create, update and delete in writes.
func (c *cachedBroker) recording() *interceptor.Funcs {
	note := func(verb string, obj client.Object) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.writes = append(c.writes, verb+" "+obj.GetName())
	}
	return &interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			note("create", obj)
			return cl.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			note("update", obj)
			return cl.Update(ctx, obj, opts...)
		},
		Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			note("delete", obj)
			return cl.Delete(ctx, obj, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, cl client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			note("update "+sub+" of", obj)
			return cl.SubResource(sub).Update(ctx, obj, opts...)
		},
	}
}

// catchUpWith makes the cache hold the API server's objects of the given kinds, and keeps the
// rest of what it held: each kind's watch catches up on its own.
func (c *cachedBroker) catchUpWith(t *testing.T, kinds ...client.ObjectList) {
	t.Helper()
	ctx := context.Background()
	var objs []client.Object
	for _, l := range []client.ObjectList{&corev1.NamespaceList{}, &corev1.ServiceList{}, &discoveryv1.EndpointSliceList{}, &mcsv1beta1.ServiceImportList{}} {
		from := c.cache
		if slices.ContainsFunc(kinds, func(k client.ObjectList) bool { return reflect.TypeOf(k) == reflect.TypeOf(l) }) {
			from = c.Client
		}
		if err := from.List(ctx, l); err != nil {
			t.Fatal(err)
		}
		items, err := meta.ExtractList(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			objs = append(objs, item.(client.Object))
		}
	}
	c.cache = c.caches(t, objs...)
}

// catchUp makes the cache hold what the API server holds.
func (c *cachedBroker) catchUp(t *testing.T) {
	t.Helper()
	c.catchUpSlices(t, false)
}

// catchUpSlices makes the cache hold the API server's slices, and its records unless
// slicesOnly: the record watch can lag behind the slice watch.
func (c *cachedBroker) catchUpSlices(t *testing.T, slicesOnly bool) {
	t.Helper()
	var objs []client.Object
	slices := &discoveryv1.EndpointSliceList{}
	records := &v1alpha1.ServiceExportRecordList{}
	for _, l := range []client.ObjectList{slices, records} {
		if err := c.Client.List(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	for i := range slices.Items {
		objs = append(objs, &slices.Items[i])
	}
	if slicesOnly {
		// The cache's records stay as they were.
		cached := &v1alpha1.ServiceExportRecordList{}
		if err := c.cache.List(context.Background(), cached); err != nil {
			t.Fatal(err)
		}
		records = cached
	}
	for i := range records.Items {
		objs = append(objs, &records.Items[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.caches != nil {
		c.cache = c.caches(t, objs...)
		return
	}
	c.cache = brokerFake(t, nil, objs...)
}

func brokerFake(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	for name, fn := range brokerIndexes() {
		b = b.WithIndex(&discoveryv1.EndpointSlice{}, name, fn).WithIndex(&v1alpha1.ServiceExportRecord{}, name, fn)
	}
	b = b.WithIndex(&v1alpha1.ServiceExportRecord{}, indexTrustedRecord, trustedRecordService)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

// A reconcile that runs again before the broker cache shows the copies it just wrote (after an
// outage the broker watch resumes seconds late, and the export's own status write enqueues it
// again at once) must not write from that cache: an update from the replaced copy is refused
// with 409, a create of a copy it created with AlreadyExists, and the bench counted 63 to 283
// of them for 10 changes. It writes nothing until the cache catches up.
func TestExportWritesNothingFromACacheBehindItsOwnWrites(t *testing.T) {
	ctx := context.Background()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	source := builders.MakeEndpointSlice("shop", "web-1").Label(discoveryv1.LabelServiceName, "web").Obj()
	source.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}
	local := fake.NewClientBuilder().WithScheme(s).WithObjects(source).
		WithIndex(&discoveryv1.EndpointSlice{}, indexLocalSource, localSourceService).Build()
	broker := &cachedBroker{}
	broker.Client = brokerFake(t, broker.recording())
	broker.cache = brokerFake(t, nil)
	r := &exportReconciler{local: local, broker: broker, brokerNamespace: "broker", self: "east",
		writeTimeout: 5 * time.Second, written: newWrittenSlices()}
	record := merge.Record{ClusterID: "east", ServiceNamespace: "shop", ServiceName: "web"}

	publish := func(step string, wantWrites int, wantErr error) {
		t.Helper()
		before := len(broker.writes)
		err := r.publish(ctx, record)
		if !errors.Is(err, wantErr) {
			t.Fatalf("%s: publish returned %v, want %v", step, err, wantErr)
		}
		if got := broker.writes[before:]; len(got) != wantWrites {
			t.Fatalf("%s: wrote %v, want %d writes", step, got, wantWrites)
		}
	}
	publish("first publication", 2, nil) // the copy, then the record
	publish("again before the cache shows the created copy", 0, errStaleCache)
	broker.catchUpSlices(t, true)
	publish("again when the cache shows the copy but not the record", 0, errStaleCache)
	broker.catchUp(t)
	publish("the cache caught up, nothing changed", 0, nil)

	record.Ports = []mcsv1beta1.ServicePort{{Name: "http", Port: 80}}
	publish("a port added to the record", 1, nil)
	publish("again before the cache shows the record's update", 0, errStaleCache)
	broker.catchUp(t)
	publish("the cache caught up with the record", 0, nil)

	source.Endpoints = append(source.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.2"}})
	if err := local.Update(ctx, source); err != nil {
		t.Fatal(err)
	}
	publish("an endpoint added", 1, nil)
	publish("again before the cache shows the update", 0, errStaleCache)
	broker.catchUp(t)
	publish("the cache caught up with the update", 0, nil)
	if n := len(r.written.m) + len(r.written.objects); n != 0 {
		t.Fatalf("%d owners' writes still remembered once the cache shows them all", n)
	}

	withdraw := func(step string, wantWrites int, wantErr error) {
		t.Helper()
		before := len(broker.writes)
		if _, err := r.withdraw(ctx, types.NamespacedName{Namespace: "shop", Name: "web"}); !errors.Is(err, wantErr) {
			t.Fatalf("%s: withdraw returned %v, want %v", step, err, wantErr)
		}
		if got := broker.writes[before:]; len(got) != wantWrites {
			t.Fatalf("%s: wrote %v, want %d writes", step, got, wantWrites)
		}
	}
	withdraw("withdrawn", 2, nil) // the copy and the record
	withdraw("again before the cache shows the deletes", 0, errStaleCache)
	broker.catchUp(t)
	withdraw("the cache shows nothing left", 0, nil)
}

func TestWrittenSlicesForgetWhatTheCacheShows(t *testing.T) {
	now := time.Now()
	w := newWrittenSlices()
	w.now = func() time.Time { return now }
	owner := types.NamespacedName{Namespace: "shop", Name: "web"}
	old := builders.MakeEndpointSlice("broker", "upd").UID("u1").Obj()
	old.ResourceVersion = "5"
	gone := builders.MakeEndpointSlice("broker", "del").UID("u2").Obj()
	changes := sliceplan.Changes{
		Create: []*discoveryv1.EndpointSlice{builders.MakeEndpointSlice("broker", "new").Obj()},
		Update: []*discoveryv1.EndpointSlice{old.DeepCopy()},
		Delete: []*discoveryv1.EndpointSlice{gone.DeepCopy()},
	}
	err := w.apply(owner, changes, func(c sliceplan.Changes, landed slicewrite.Observer[*discoveryv1.EndpointSlice]) error {
		landed(slicewrite.Create, c.Create[0], 0, nil)
		c.Update[0].ResourceVersion = "6" // the API server's answer replaces it
		landed(slicewrite.Update, c.Update[0], 0, nil)
		landed(slicewrite.Delete, c.Delete[0], 0, apierrors.NewServiceUnavailable("down"))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	updated := old.DeepCopy()
	updated.ResourceVersion = "6"
	created := builders.MakeEndpointSlice("broker", "new").Obj()
	for _, tc := range []struct {
		name   string
		cached []discoveryv1.EndpointSlice
		behind bool
	}{
		{"the create and the update missing", []discoveryv1.EndpointSlice{*old, *gone}, true},
		{"the update missing", []discoveryv1.EndpointSlice{*old, *created, *gone}, true},
		// The failed delete is not remembered: the slice it failed on is no sign of a lag.
		{"both shown", []discoveryv1.EndpointSlice{*updated, *created, *gone}, false},
		{"forgotten once shown", []discoveryv1.EndpointSlice{*old}, false},
	} {
		if got := w.behind(owner, tc.cached); got != tc.behind {
			t.Fatalf("%s: behind %v, want %v", tc.name, got, tc.behind)
		}
	}

	// A write the cache never shows holds reconciles back for writtenExpiry at most.
	if err := w.apply(owner, sliceplan.Changes{Create: []*discoveryv1.EndpointSlice{created}},
		func(c sliceplan.Changes, landed slicewrite.Observer[*discoveryv1.EndpointSlice]) error {
			landed(slicewrite.Create, c.Create[0], 0, nil)
			return nil
		}); err != nil {
		t.Fatal(err)
	}
	if !w.behind(owner, nil) {
		t.Fatal("a created slice missing from the cache is not a lag")
	}
	now = now.Add(writtenExpiry + time.Second)
	if w.behind(owner, nil) {
		t.Fatal("a remembered write held the reconcile back past writtenExpiry")
	}
}

// memberScheme is a member's types: the broker's and the MCS API's.
func memberScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := Scheme()
	if err != nil {
		t.Fatal(err)
	}
	if err := mcsv1beta1.Install(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// localFake is a member's API server, or its cache, with the import controller's slice index.
func localFake(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) client.WithWatch {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(memberScheme(t)).WithObjects(objs...).
		WithStatusSubresource(&mcsv1beta1.ServiceImport{}, &mcsv1beta1.ServiceExport{}).
		WithIndex(&discoveryv1.EndpointSlice{}, indexLocalImported, localImportedService).
		WithIndex(&discoveryv1.EndpointSlice{}, indexLocalSource, localSourceService)
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	return b.Build()
}

// The import controller holds back the same way: a reconcile that runs again before the member's
// cache shows the imported-slice writes it just made (here the deletes of an import nobody
// exports any more) writes nothing, where it would delete the same slices a second time.
func TestImportWritesNothingFromACacheBehindItsOwnWrites(t *testing.T) {
	imported := builders.MakeEndpointSlice("shop", "web-east-1").UID("u1").
		Label(discoveryv1.LabelManagedBy, sliceplan.ManagedBy).Label(mcsv1beta1.LabelServiceName, "web").Obj()
	local := &cachedBroker{caches: func(t *testing.T, objs ...client.Object) client.WithWatch { return localFake(t, nil, objs...) }}
	local.Client = localFake(t, local.recording(), imported.DeepCopy())
	local.cache = localFake(t, nil, imported.DeepCopy())
	r := &importReconciler{local: local, broker: brokerFake(t, nil), brokerNamespace: "broker", self: "west",
		members: newMembership("west", "broker", time.Minute, nil), recorder: events.NewFakeRecorder(10),
		written: newWrittenSlices()}
	key := types.NamespacedName{Namespace: "shop", Name: "web"}

	reconcile := importSteps(t, r, local, key)
	reconcile("nobody exports web: its imported slice goes", 1, nil)
	reconcile("again before the cache shows the delete", 0, errStaleCache)
	local.catchUp(t)
	reconcile("the cache caught up, nothing left", 0, nil)
	if n := len(r.written.m); n != 0 {
		t.Fatalf("%d imports' writes still remembered once the cache shows them all", n)
	}
}

// importSteps returns one import sync of key as a test step: it checks the sync's error and how
// many writes it sent local's API server.
func importSteps(t *testing.T, r *importReconciler, local *cachedBroker, key types.NamespacedName) func(step string, wantWrites int, wantErr error) {
	return func(step string, wantWrites int, wantErr error) {
		t.Helper()
		before := len(local.writes)
		if err := r.reconcile(context.Background(), key); !errors.Is(err, wantErr) {
			t.Fatalf("%s: reconcile returned %v, want %v", step, err, wantErr)
		}
		if got := local.writes[before:]; len(got) != wantWrites {
			t.Fatalf("%s: wrote %v, want %d writes", step, got, wantWrites)
		}
	}
}

// A new import waits until the member has read the Leases (it cannot know before who is still
// publishing), and is then four writes (the derived Service, the ServiceImport, its slice and its
// status); a sync that runs again before the cache shows the ServiceImport and the derived
// Service (the slice's event can come first) writes nothing, where it would create both again
// (AlreadyExists) or write the status from the import as created (409). Peers of a member
// joining had 3 to 5 of those in a hundred imports.
func TestImportWritesNothingWhileTheCacheLacksItsServiceImport(t *testing.T) {
	ctx := context.Background()
	source := builders.MakeEndpointSlice("shop", "web-1").Label(discoveryv1.LabelServiceName, "web").Obj()
	source.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}
	// west exports web itself: its record and copy go to the broker, its own slice is read locally.
	// A sync that waits reads no further than who is still publishing: no Leases for the
	// allocation, no slices.
	leaseReads := 0
	broker := brokerFake(t, &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if _, ok := list.(*coordinationv1.LeaseList); ok {
			leaseReads++
		}
		return c.List(ctx, list, opts...)
	}})
	exporter := &exportReconciler{local: localFake(t, nil, source.DeepCopy()), broker: broker, brokerNamespace: "broker", self: "west",
		writeTimeout: 5 * time.Second}
	record := merge.Record{ClusterID: "west", ServiceNamespace: "shop", ServiceName: "web", Type: mcsv1beta1.ClusterSetIP,
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}
	if err := exporter.publish(ctx, record); err != nil {
		t.Fatal(err)
	}
	local := &cachedBroker{caches: func(t *testing.T, objs ...client.Object) client.WithWatch { return localFake(t, nil, objs...) }}
	funcs := local.recording()
	recordCreate := funcs.Create
	funcs.Create = func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if svc, ok := obj.(*corev1.Service); ok { // the API server allocates the ClusterSetIP
			svc.Spec.ClusterIP, svc.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
		}
		return recordCreate(ctx, cl, obj, opts...)
	}
	local.Client = localFake(t, funcs, namespace.DeepCopy(), source.DeepCopy())
	local.cache = localFake(t, nil, namespace.DeepCopy(), source.DeepCopy())
	members := newMembership("west", "broker", time.Minute, broker)
	members.initialWait = time.Minute
	r := &importReconciler{local: local, broker: broker, brokerNamespace: "broker", self: "west",
		members: members, recorder: events.NewFakeRecorder(10), written: newWrittenSlices()}
	key := types.NamespacedName{Namespace: "shop", Name: "web"}

	reconcile := importSteps(t, r, local, key)
	reconcile("before the Leases were read, which say who is still publishing", 0, nil)
	if leaseReads != 0 {
		t.Fatalf("a sync that waits read the Leases %d times", leaseReads)
	}
	if _, err := members.Reconcile(ctx, membershipKey); err != nil {
		t.Fatal(err)
	}
	leaseReads = 0
	reconcile("web imported", 4, nil)
	if leaseReads == 0 {
		t.Fatal("the import was planned without reading the members' Leases")
	}
	reconcile("again before the cache shows any of it", 0, errStaleCache)
	local.catchUpWith(t, &discoveryv1.EndpointSliceList{}, &corev1.ServiceList{})
	reconcile("the cache shows the slice and the derived Service, not the import", 0, errStaleCache)
	local.catchUpWith(t, &mcsv1beta1.ServiceImportList{})
	reconcile("the cache caught up, nothing changed", 0, nil)
	if n := len(r.written.m) + len(r.written.objects); n != 0 {
		t.Fatalf("%d writes still remembered once the cache shows them all", n)
	}
}

// A ServiceExport reconciled again before the cache shows its last status write (its own
// copies' events enqueue it at once) must not write that status again from the old export:
// the write is refused with 409, and half of a bulk start's exports were, one extra request
// each. It writes once the cache shows its write.
func TestExportStatusIsNotWrittenFromACacheBehindItsOwnStatusWrite(t *testing.T) {
	ctx := context.Background()
	export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	statusWrites := 0
	build := func(funcs *interceptor.Funcs, objs ...client.Object) client.WithWatch {
		b := fake.NewClientBuilder().WithScheme(memberScheme(t)).WithObjects(objs...).WithStatusSubresource(&mcsv1beta1.ServiceExport{})
		if funcs != nil {
			b = b.WithInterceptorFuncs(*funcs)
		}
		return b.Build()
	}
	local := &cachedBroker{}
	local.Client = build(&interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		statusWrites++
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}}, export.DeepCopy())
	local.cache = build(nil, export.DeepCopy())
	catchUp := func() {
		now := &mcsv1beta1.ServiceExport{}
		if err := local.Client.Get(ctx, client.ObjectKeyFromObject(export), now); err != nil {
			t.Fatal(err)
		}
		local.mu.Lock()
		local.cache = build(nil, now)
		local.mu.Unlock()
	}
	r := &exportReconciler{local: local, recorder: events.NewFakeRecorder(10), written: newWrittenSlices()}
	write := func(step string, reason string, want int) {
		t.Helper()
		cached := &mcsv1beta1.ServiceExport{}
		if err := local.Get(ctx, client.ObjectKeyFromObject(export), cached); err != nil {
			t.Fatal(err)
		}
		status := cached.Status.DeepCopy()
		meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: reason})
		before := statusWrites
		if err := r.writeStatus(ctx, cached, status); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if got := statusWrites - before; got != want {
			t.Fatalf("%s: %d status writes, want %d", step, got, want)
		}
	}
	write("first status", "Exported", 1)
	write("again before the cache shows it", "Exported", 0)
	catchUp()
	write("the cache shows it, nothing changed", "Exported", 0)
	write("a changed status", "Changed", 1)
	write("again before the cache shows the change", "Changed", 0)
	catchUp()
	write("the cache caught up", "Changed", 0)
	if n := len(r.written.objects); n != 0 {
		t.Fatalf("%d writes still remembered once the cache shows them", n)
	}
}

func TestWrittenObjectsOfDeletedExportsExpire(t *testing.T) {
	now := time.Now()
	w := newWrittenSlices()
	w.now = func() time.Time { return now }
	gone := types.NamespacedName{Namespace: "shop", Name: "gone"}
	w.objectWritten(writtenExportStatus, gone, slicewrite.Update, "5", "")
	now = now.Add(writtenExpiry + time.Second)
	w.objectWritten(writtenRecord, types.NamespacedName{Namespace: "shop", Name: "web"}, slicewrite.Create, "", "")
	if _, ok := w.objects[writtenKey{writtenExportStatus, gone}]; ok || len(w.objects) != 1 {
		t.Fatalf("remembered %v; an expired write of an object nobody looks up again must be dropped", w.objects)
	}
}

// One sync's writes of the same object add up: a ServiceImport created and then given its
// status leaves the cache behind while it shows no import or the import as created, and a
// derived Service deleted and created again while it shows none or the old one.
func TestWritesOfOneObjectInOneSyncAddUp(t *testing.T) {
	now := time.Now()
	w := newWrittenSlices()
	w.now = func() time.Time { return now }
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	w.objectWritten(writtenImport, key, slicewrite.Create, "", "")
	w.objectWritten(writtenImport, key, slicewrite.Update, "7", "") // the status, from the created import
	w.objectWritten(writtenDerived, key, slicewrite.Delete, "", "old-uid")
	w.objectWritten(writtenDerived, key, slicewrite.Create, "", "")
	shown := func(uid types.UID, rv string) metav1.Object {
		return &metav1.ObjectMeta{UID: uid, ResourceVersion: rv}
	}
	for _, tc := range []struct {
		name   string
		kind   string
		shown  metav1.Object
		behind bool
	}{
		{"no import yet", writtenImport, nil, true},
		{"the import as created", writtenImport, shown("si", "7"), true},
		{"the import with its status", writtenImport, shown("si", "8"), false},
		{"the old derived Service", writtenDerived, shown("old-uid", "3"), true},
		{"no derived Service yet", writtenDerived, nil, true},
		{"the new derived Service", writtenDerived, shown("new-uid", "9"), false},
	} {
		if got := w.objectBehind(tc.kind, key, tc.shown); got != tc.behind {
			t.Fatalf("%s: behind %v, want %v", tc.name, got, tc.behind)
		}
	}
	if len(w.objects) != 0 {
		t.Fatalf("still remembered once shown: %v", w.objects)
	}
}
