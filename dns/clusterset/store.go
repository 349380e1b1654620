package clusterset

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/dns/records"
)

// Store keeps the imported Services in memory, rebuilt from informer events for the one Service
// an event touches, so a query never reaches the API server and a change is answerable as soon
// as its watch event arrives.
type Store struct {
	mu       sync.RWMutex
	imports  map[types.NamespacedName]*mcsv1beta1.ServiceImport
	slices   map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	sliceOf  map[types.NamespacedName]types.NamespacedName // slice -> the Service it belongs to
	services map[types.NamespacedName]*records.Service
	perNS    map[string]int
	serial   uint32

	// addressNames holds, for every clusterset IP and ready headless endpoint address, the
	// names its PTR record could point to (records.AddressName), kept with services.
	addressNames map[netip.Addr][]string
	// sortedAddrs are addressNames' keys in order, for finding an address in a prefix with a
	// binary search; rebuilt on the first such query after a change (sortedStale), as changes
	// come far more often than queries for prefixes.
	sortedAddrs []netip.Addr
	sortedStale bool

	synced atomic.Bool
}

// NewStore returns an empty Store; Run fills it.
func NewStore() *Store {
	return &Store{
		imports:  map[types.NamespacedName]*mcsv1beta1.ServiceImport{},
		slices:   map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
		sliceOf:  map[types.NamespacedName]types.NamespacedName{},
		services: map[types.NamespacedName]*records.Service{},
		perNS:    map[string]int{},
		serial:   uint32(time.Now().Unix()),

		addressNames: map[netip.Addr][]string{},
	}
}

// Service implements records.Lookup.
func (s *Store) Service(namespace, name string) (*records.Service, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	svc, ok := s.services[types.NamespacedName{Namespace: namespace, Name: name}]
	return svc, ok
}

// Namespace implements records.Lookup.
func (s *Store) Namespace(namespace string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.perNS[namespace] > 0
}

// AddressNames implements records.Lookup.
func (s *Store) AddressNames(addr netip.Addr) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.addressNames[addr])
}

// HasAddressIn implements records.Lookup.
func (s *Store) HasAddressIn(prefix netip.Prefix) bool {
	s.mu.RLock()
	if !s.sortedStale {
		defer s.mu.RUnlock()
		return containsAddrIn(s.sortedAddrs, prefix)
	}
	s.mu.RUnlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sortedStale {
		s.sortedAddrs = s.sortedAddrs[:0]
		for addr := range s.addressNames {
			s.sortedAddrs = append(s.sortedAddrs, addr)
		}
		slices.SortFunc(s.sortedAddrs, netip.Addr.Compare)
		s.sortedStale = false
	}
	return containsAddrIn(s.sortedAddrs, prefix)
}

// containsAddrIn reports whether sorted holds an address of prefix: the addresses of a prefix
// sort together, from its first address on.
func containsAddrIn(sorted []netip.Addr, prefix netip.Prefix) bool {
	first := prefix.Masked().Addr()
	i, _ := slices.BinarySearchFunc(sorted, first, netip.Addr.Compare)
	return i < len(sorted) && prefix.Contains(sorted[i])
}

// Serial is the SOA serial: the second of the last change.
func (s *Store) Serial() uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.serial
}

// Synced reports whether the store holds everything the API server had when it started.
func (s *Store) Synced() bool { return s.synced.Load() }

// importedSliceSelector matches the slices an MCS implementation imports into a member: they
// carry both the Service name and the cluster they come from.
func importedSliceSelector() (labels.Selector, error) {
	name, err := labels.NewRequirement(mcsv1beta1.LabelServiceName, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	cluster, err := labels.NewRequirement(mcsv1beta1.LabelSourceCluster, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	return labels.NewSelector().Add(*name, *cluster), nil
}

// Run watches ServiceImports and imported EndpointSlices through cfg until ctx ends. It returns
// once the informers have delivered their first lists (or failed to within the context), with
// the store then serving; the watches go on in the background.
func (s *Store) Run(ctx context.Context, cfg *rest.Config) error {
	scheme := runtime.NewScheme()
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		return err
	}
	if err := mcsv1beta1.Install(scheme); err != nil {
		return err
	}
	selector, err := importedSliceSelector()
	if err != nil {
		return err
	}
	// A fixed mapping for the two kinds, so starting needs no discovery call: with the API
	// server unreachable the informers retry in the background instead of failing the server.
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(discoveryv1.SchemeGroupVersion.WithKind("EndpointSlice"), meta.RESTScopeNamespace)
	mapper.Add(mcsv1beta1.SchemeGroupVersion.WithKind("ServiceImport"), meta.RESTScopeNamespace)
	c, err := cache.New(cfg, cache.Options{
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject:         map[client.Object]cache.ByObject{&discoveryv1.EndpointSlice{}: {Label: selector}},
	})
	if err != nil {
		return err
	}
	importsReg, err := watch(ctx, c, &mcsv1beta1.ServiceImport{}, s.setImport, s.deleteImport)
	if err != nil {
		return err
	}
	slicesReg, err := watch(ctx, c, &discoveryv1.EndpointSlice{}, s.setSlice, s.deleteSlice)
	if err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	if !toolscache.WaitForCacheSync(ctx.Done(), importsReg.HasSynced, slicesReg.HasSynced) {
		return fmt.Errorf("ServiceImports and EndpointSlices not listed: %w", context.Cause(ctx))
	}
	s.synced.Store(true)
	return nil
}

func unwrap(obj any) any {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func (s *Store) setImport(obj any) {
	imp, ok := unwrap(obj).(*mcsv1beta1.ServiceImport)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: imp.Namespace, Name: imp.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.imports[key] = imp
	s.rebuild(key)
}

func (s *Store) deleteImport(obj any) {
	imp, ok := unwrap(obj).(*mcsv1beta1.ServiceImport)
	if !ok {
		return
	}
	key := types.NamespacedName{Namespace: imp.Namespace, Name: imp.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.imports, key)
	s.rebuild(key)
}

func (s *Store) setSlice(obj any) {
	slice, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	id := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	key := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Labels[mcsv1beta1.LabelServiceName]}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.sliceOf[id]; ok && old != key {
		s.removeSlice(id)
	}
	if s.slices[key] == nil {
		s.slices[key] = map[string]*discoveryv1.EndpointSlice{}
	}
	s.slices[key][slice.Name] = slice
	s.sliceOf[id] = key
	s.rebuild(key)
}

func (s *Store) deleteSlice(obj any) {
	slice, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.removeSlice(types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name})
}

// removeSlice forgets the slice id and rebuilds the Service it belonged to; s.mu is held.
func (s *Store) removeSlice(id types.NamespacedName) {
	key, ok := s.sliceOf[id]
	if !ok {
		return
	}
	delete(s.sliceOf, id)
	delete(s.slices[key], id.Name)
	if len(s.slices[key]) == 0 {
		delete(s.slices, key)
	}
	s.rebuild(key)
}

// rebuild recomputes the Service key from its import and slices; s.mu is held.
func (s *Store) rebuild(key types.NamespacedName) {
	s.serial = nextSerial(s.serial)
	imp, ok := s.imports[key]
	old, had := s.services[key]
	if had {
		s.indexAddresses(key, old, false)
	}
	if !ok {
		if had {
			delete(s.services, key)
			if s.perNS[key.Namespace]--; s.perNS[key.Namespace] <= 0 {
				delete(s.perNS, key.Namespace)
			}
		}
		return
	}
	list := make([]*discoveryv1.EndpointSlice, 0, len(s.slices[key]))
	for _, sl := range s.slices[key] {
		list = append(list, sl)
	}
	svc := records.Build(imp, list)
	s.services[key] = &svc
	s.indexAddresses(key, &svc, true)
	if !had {
		s.perNS[key.Namespace]++
	}
}

// indexAddresses adds the PTR names of the Service key to addressNames, or removes them; s.mu
// is held.
func (s *Store) indexAddresses(key types.NamespacedName, svc *records.Service, add bool) {
	for _, a := range svc.AddressNames(key.Namespace, key.Name) {
		names := s.addressNames[a.Addr]
		if add {
			names = append(names, a.Name)
		} else if i := slices.Index(names, a.Name); i >= 0 {
			names = slices.Delete(names, i, i+1)
		}
		if len(names) == 0 {
			delete(s.addressNames, a.Addr)
		} else {
			s.addressNames[a.Addr] = names
		}
		s.sortedStale = true
	}
}

// nextSerial is the current second, or one more than the last serial when several changes fall
// in the same second, so the serial moves with every change.
func nextSerial(last uint32) uint32 {
	now := uint32(time.Now().Unix())
	if now > last {
		return now
	}
	return last + 1
}

// watch feeds one kind's informer events to set and del.
func watch(ctx context.Context, c cache.Cache, obj client.Object, set, del func(any)) (toolscache.ResourceEventHandlerRegistration, error) {
	informer, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	return informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: del,
	})
}
