package mcsbench

import (
	"context"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// memberView is what one member imports, kept by watches: which source clusters' ready
// addresses each Service's imported slices list, and which ServiceImports are Ready with every
// cluster. It records when each (Service, source, address) was first seen ready, for
// propagation times.
type memberView struct {
	mu sync.Mutex
	// addresses[service][source] are the ready addresses of the source's imported slices.
	addresses map[string]map[string]map[string]bool
	// slices remembers each imported slice's (service, source, addresses) to undo on delete.
	slices     map[string]importedSlice
	firstReady map[string]time.Time
	// readyImports are the ServiceImports Ready with this many clusters.
	readyImports map[string]int
}

type importedSlice struct {
	service, source string
	addresses       []string
}

func newMemberView() *memberView {
	return &memberView{addresses: map[string]map[string]map[string]bool{}, slices: map[string]importedSlice{},
		firstReady: map[string]time.Time{}, readyImports: map[string]int{}}
}

func arrivalKey(service, source, address string) string {
	return service + "/" + source + "/" + address
}

func (v *memberView) sliceChanged(obj any) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	now := time.Now()
	seen := importedSlice{service: s.Labels[mcsv1beta1.LabelServiceName], source: s.Labels[mcsv1beta1.LabelSourceCluster]}
	for _, ep := range s.Endpoints {
		if ptr.Deref(ep.Conditions.Ready, false) {
			seen.addresses = append(seen.addresses, ep.Addresses...)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forget(s.Namespace + "/" + s.Name)
	v.slices[s.Namespace+"/"+s.Name] = seen
	bySource := v.addresses[seen.service]
	if bySource == nil {
		bySource = map[string]map[string]bool{}
		v.addresses[seen.service] = bySource
	}
	if bySource[seen.source] == nil {
		bySource[seen.source] = map[string]bool{}
	}
	for _, a := range seen.addresses {
		bySource[seen.source][a] = true
		if k := arrivalKey(seen.service, seen.source, a); v.firstReady[k].IsZero() {
			v.firstReady[k] = now
		}
	}
}

func (v *memberView) sliceDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
		v.mu.Lock()
		v.forget(s.Namespace + "/" + s.Name)
		v.mu.Unlock()
	}
}

// forget drops a slice's addresses; one address per source and Service is in one slice only
// in this benchmark, so no count is needed.
func (v *memberView) forget(key string) {
	old, ok := v.slices[key]
	if !ok {
		return
	}
	delete(v.slices, key)
	for _, a := range old.addresses {
		delete(v.addresses[old.service][old.source], a)
	}
	if len(v.addresses[old.service][old.source]) == 0 {
		delete(v.addresses[old.service], old.source)
	}
}

func (v *memberView) importChanged(obj any) {
	u, ok := obj.(runtime.Unstructured)
	if !ok {
		return
	}
	si := &mcsv1beta1.ServiceImport{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.UnstructuredContent(), si); err != nil {
		return
	}
	n := 0
	if meta.IsStatusConditionTrue(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady)) {
		n = len(si.Status.Clusters)
	}
	v.mu.Lock()
	v.readyImports[si.Name] = n
	v.mu.Unlock()
}

func (v *memberView) importDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		v.mu.Lock()
		delete(v.readyImports, o.GetName())
		v.mu.Unlock()
	}
}

// complete counts the Services whose imports list a ready address from each of sources and
// whose ServiceImport is Ready with that many clusters.
func (v *memberView) complete(sources []string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for service, bySource := range v.addresses {
		all := v.readyImports[service] == len(sources)
		for _, src := range sources {
			all = all && len(bySource[src]) > 0
		}
		if all {
			n++
		}
	}
	return n
}

// empty reports whether the member imports nothing at all.
func (v *memberView) empty() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.slices) == 0 && len(v.readyImports) == 0
}

// slicesFrom counts the imported slices of one source cluster.
func (v *memberView) slicesFrom(source string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	n := 0
	for _, s := range v.slices {
		if s.source == source {
			n++
		}
	}
	return n
}

func (v *memberView) arrived(service, source, address string) (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	at, ok := v.firstReady[arrivalKey(service, source, address)]
	return at, ok
}

// watchMember starts the watches of one member's imports in namespace until ctx ends, and
// waits for their first lists.
func watchMember(ctx context.Context, cfg *rest.Config, namespace string) (*memberView, error) {
	v := newMemberView()
	// Protobuf and uncompressed, as the managers watch built-in types: a JSON or gzip watcher
	// of the imported slices would have each member's API server encode or compress every
	// slice event once more just for the bench, work the write floors it is set beside do not
	// pay.
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	proto := rest.CopyConfig(cfg)
	proto.ContentType = runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(proto)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	slices := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = mcsv1beta1.LabelSourceCluster }))
	sliceInformer := slices.Discovery().V1().EndpointSlices().Informer()
	if _, err := sliceInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: v.sliceChanged, UpdateFunc: func(_, obj any) { v.sliceChanged(obj) }, DeleteFunc: v.sliceDeleted,
	}); err != nil {
		return nil, err
	}
	imports := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, namespace, nil)
	importInformer := imports.ForResource(mcsv1beta1.SchemeGroupVersion.WithResource("serviceimports")).Informer()
	if _, err := importInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: v.importChanged, UpdateFunc: func(_, obj any) { v.importChanged(obj) }, DeleteFunc: v.importDeleted,
	}); err != nil {
		return nil, err
	}
	slices.Start(ctx.Done())
	imports.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), sliceInformer.HasSynced, importInformer.HasSynced) {
		return nil, ctx.Err()
	}
	return v, nil
}
