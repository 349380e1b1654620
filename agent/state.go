package agent

import (
	"cmp"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/agent/selection"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
)

// ZoneLabel is the Node label that names the node's zone.
const ZoneLabel = corev1.LabelTopologyZone

// store holds what the informers delivered and what changed since the last
// sync. Event handlers write it; the sync loop converts only the Services
// marked dirty, so a sync after one change costs one conversion, not one per
// Service.
type store struct {
	mu       sync.Mutex
	nodeName string
	node     selection.Node
	// started filters out trigger times older than the agent: they measure
	// the time the agent was not running, not network programming.
	started time.Time

	services map[types.NamespacedName]*corev1.Service
	slices   map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice
	imports  map[types.NamespacedName]*mcsv1beta1.ServiceImport
	// derived maps a ServiceImport to the Services it owns, so a change of
	// its IPs marks them dirty.
	derived map[types.NamespacedName]map[types.NamespacedName]bool

	dirty    map[types.NamespacedName]bool
	allDirty bool
	// triggers are the last-change-trigger-times of slice changes not yet
	// programmed, per Service.
	triggers map[types.NamespacedName][]time.Time

	converted map[types.NamespacedName]conversion
	counts    convertedCounts
	// every holds the dataplane input of every programmed Service only while syncs keep asking
	// for all of them outside a full refresh (a dataplane that cannot take changes alone: after
	// a failed sync, or while two Services claim one address and port), so that each of those
	// converts only what changed; the first sync that does without it drops it (everyUsed).
	every     map[types.NamespacedName]dataplane.Service
	everyUsed bool
	// order lists the keys of converted sorted, nil when a key came or went.
	order []types.NamespacedName
	// kick tells the sync loop that something changed.
	kick func()
}

func newStore(nodeName string, started time.Time, kick func()) *store {
	return &store{
		nodeName:  nodeName,
		node:      selection.Node{Name: nodeName},
		started:   started,
		services:  map[types.NamespacedName]*corev1.Service{},
		slices:    map[types.NamespacedName]map[string]*discoveryv1.EndpointSlice{},
		imports:   map[types.NamespacedName]*mcsv1beta1.ServiceImport{},
		derived:   map[types.NamespacedName]map[types.NamespacedName]bool{},
		dirty:     map[types.NamespacedName]bool{},
		triggers:  map[types.NamespacedName][]time.Time{},
		converted: map[types.NamespacedName]conversion{},
		kick:      kick,
	}
}

func (s *store) markLocked(key types.NamespacedName) {
	s.dirty[key] = true
}

// setService records svc (nil: deleted) under key.
func (s *store) setService(key types.NamespacedName, svc *corev1.Service) {
	s.mu.Lock()
	if old := s.services[key]; old != nil {
		if imp, ok := importOf(old); ok {
			delete(s.derived[imp], key)
			if len(s.derived[imp]) == 0 {
				delete(s.derived, imp)
			}
		}
	}
	if svc == nil {
		delete(s.services, key)
	} else {
		s.services[key] = svc
		if imp, ok := importOf(svc); ok {
			if s.derived[imp] == nil {
				s.derived[imp] = map[types.NamespacedName]bool{}
			}
			s.derived[imp][key] = true
		}
	}
	s.markLocked(key)
	s.mu.Unlock()
	serviceChanges.Inc()
	s.kick()
}

// setSlice records slice (nil: deleted) named name for the Service key.
// trigger is the slice's last-change-trigger-time when this event changed
// it, zero otherwise.
func (s *store) setSlice(key types.NamespacedName, name string, slice *discoveryv1.EndpointSlice, trigger time.Time) {
	s.mu.Lock()
	if slice == nil {
		delete(s.slices[key], name)
		if len(s.slices[key]) == 0 {
			delete(s.slices, key)
		}
	} else {
		if s.slices[key] == nil {
			s.slices[key] = map[string]*discoveryv1.EndpointSlice{}
		}
		s.slices[key][name] = slice
	}
	if !trigger.IsZero() && trigger.After(s.started) {
		s.triggers[key] = append(s.triggers[key], trigger)
	}
	s.markLocked(key)
	s.mu.Unlock()
	endpointChanges.Inc()
	s.kick()
}

// setImport records a ServiceImport (nil: deleted) and marks the Services
// derived from it.
func (s *store) setImport(key types.NamespacedName, imp *mcsv1beta1.ServiceImport) {
	s.mu.Lock()
	if imp == nil {
		delete(s.imports, key)
	} else {
		s.imports[key] = imp
	}
	for svc := range s.derived[key] {
		s.markLocked(svc)
	}
	changed := len(s.derived[key]) > 0
	s.mu.Unlock()
	if changed {
		serviceChanges.Inc()
		s.kick()
	}
}

// setNode records this node's zone (empty when the Node or its label is
// missing). A new zone changes every Service's hint decision.
func (s *store) setNode(node *corev1.Node) {
	zone := ""
	if node != nil {
		zone = node.Labels[ZoneLabel]
	}
	s.setNodeFact(&s.node.Zone, zone)
}

// setCluster records this node's cluster id. A new id changes the cluster
// plan of every import.
func (s *store) setCluster(id string) { s.setNodeFact(&s.node.Cluster, id) }

// setNodeFact sets one fact about this node (a field of s.node); a change
// re-selects every Service's endpoints.
func (s *store) setNodeFact(field *string, value string) {
	s.mu.Lock()
	changed := *field != value
	*field = value
	s.allDirty = s.allDirty || changed
	s.mu.Unlock()
	if changed {
		s.kick()
	}
}

// importOf returns the ServiceImport a derived Service belongs to: the one its name and
// multicluster.kubernetes.io/service-name label bind it to, as fleetslice's import controller
// does (names.ImportOfDerived), or the one an owner reference names, as other MCS
// implementations (and fleetslice's own did before it bound them by name) do.
func importOf(svc *corev1.Service) (types.NamespacedName, bool) {
	if name, ok := names.ImportOfDerived(svc.Namespace, svc.Name, svc.Labels[mcsv1beta1.LabelServiceName]); ok {
		return types.NamespacedName{Namespace: svc.Namespace, Name: name}, true
	}
	if ref, ok := importRef(svc); ok {
		return types.NamespacedName{Namespace: svc.Namespace, Name: ref.Name}, true
	}
	return types.NamespacedName{}, false
}

func importRef(svc *corev1.Service) (metav1.OwnerReference, bool) {
	for _, ref := range svc.OwnerReferences {
		if ref.Kind == mcsv1beta1.ServiceImportKindName && groupOf(ref.APIVersion) == mcsv1beta1.GroupName {
			return ref, true
		}
	}
	return metav1.OwnerReference{}, false
}

func groupOf(apiVersion string) string {
	for i := 0; i < len(apiVersion); i++ {
		if apiVersion[i] == '/' {
			return apiVersion[:i]
		}
	}
	return ""
}

// importFor returns the ServiceImport svc belongs to. An owner reference binds only the very
// object it names: a ServiceImport recreated under the same name has a new UID and must not
// lend its IPs to the old one's Service. A Service bound by name takes the ServiceImport of
// that name, whose IPs the import controller copies from this very Service.
func (s *store) importFor(svc *corev1.Service) *mcsv1beta1.ServiceImport {
	key, ok := importOf(svc)
	if !ok {
		return nil
	}
	imp := s.imports[key]
	if imp == nil {
		return nil
	}
	if ref, owned := importRef(svc); owned && ref.Name == key.Name && ref.UID != "" && ref.UID != imp.UID {
		return nil
	}
	return imp
}

// pending is the outcome of refresh: what changed since the last one, the
// way to every Service's dataplane input, and what to observe once it has
// been programmed.
type pending struct {
	// all lists every programmed Service's dataplane input, ordered by key.
	// It is built on demand, for a full sync or a listener, since an
	// incremental sync should not pay for the Services it does not touch.
	all func() []dataplane.Service
	// updated and removed are what changed since the last refresh: the Services converted
	// again that are programmed, and the keys of those gone or no longer programmed.
	updated []dataplane.Service
	removed []string
	// triggers are the trigger times of the Services converted again.
	triggers map[types.NamespacedName][]time.Time
	// changed counts the Services converted again.
	changed  int
	counts   convertedCounts
	problems map[types.NamespacedName][]string
}

// convertedCounts are totals over every converted Service, kept as each one is
// converted so that a sync reads them without a walk.
type convertedCounts struct {
	// programmed counts the Services given to the dataplanes, skipped those
	// not programmed at all; the noLocal counts feed the gauges of Local
	// policies without local endpoints.
	programmed, skipped              int
	noLocalInternal, noLocalExternal int
}

// conversion is what the store keeps of a Service's last conversion: whether it is programmed
// and what the gauges count. The dataplane input itself is not kept once the dataplanes have it:
// they remember what they wrote by digest, and the rare sync that needs every Service outside a
// full refresh converts them again (programmedServices).
type conversion struct {
	skipped                          bool
	noLocalInternal, noLocalExternal bool
}

func conversionOf(c Converted) conversion {
	return conversion{skipped: c.Skip != "", noLocalInternal: c.NoLocalInternal, noLocalExternal: c.NoLocalExternal}
}

// add adds c's contribution to the counts, or takes it away with sign -1.
func (n *convertedCounts) add(c conversion, sign int) {
	if c.skipped {
		n.skipped += sign
		return
	}
	n.programmed += sign
	if c.noLocalInternal {
		n.noLocalInternal += sign
	}
	if c.noLocalExternal {
		n.noLocalExternal += sign
	}
}

// refresh converts the dirty Services (every Service when all is set or the
// node changed) and returns what changed.
func (s *store) refresh(all bool) pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := pending{triggers: map[types.NamespacedName][]time.Time{}, problems: map[types.NamespacedName][]string{}}
	if !s.everyUsed {
		s.every = nil
	}
	s.everyUsed = false
	convert := func(key types.NamespacedName) {
		out.changed++
		if t := s.triggers[key]; len(t) > 0 {
			out.triggers[key] = t
			delete(s.triggers, key)
		}
		svc := s.services[key]
		old, known := s.converted[key]
		if known {
			s.counts.add(old, -1)
		}
		if known != (svc != nil) {
			s.order = nil
		}
		delete(s.every, key)
		if svc == nil {
			delete(s.converted, key)
			out.removed = append(out.removed, key.String())
			return
		}
		c := Convert(s.inputsLocked(key), s.node)
		s.converted[key] = conversionOf(c)
		s.counts.add(s.converted[key], 1)
		if c.Skip != "" {
			out.removed = append(out.removed, key.String())
		} else {
			out.updated = append(out.updated, c.Service)
			if s.every != nil {
				s.every[key] = c.Service
			}
		}
		if len(c.Problems) > 0 {
			out.problems[key] = c.Problems
		}
	}
	everything := all || s.allDirty
	if everything {
		for key := range s.converted {
			if s.services[key] == nil {
				convert(key)
			}
		}
		for key := range s.services {
			convert(key)
		}
	} else {
		for key := range s.dirty {
			convert(key)
		}
	}
	clear(s.dirty)
	s.allDirty = false
	out.counts = s.counts
	var fresh []dataplane.Service
	if everything {
		fresh = out.updated
	}
	out.all = s.programmedServices(fresh)
	return out
}

// inputsLocked gathers what Convert reads for the Service key (a zero ServiceInputs when it is
// gone).
func (s *store) inputsLocked(key types.NamespacedName) ServiceInputs {
	svc := s.services[key]
	if svc == nil {
		return ServiceInputs{}
	}
	in := ServiceInputs{Service: svc, Import: s.importFor(svc)}
	for _, sl := range s.slices[key] {
		in.Slices = append(in.Slices, sl)
	}
	// Map order is random; a stable order keeps the candidates (and so
	// the dataplane input) identical when nothing changed.
	slices.SortFunc(in.Slices, func(a, b *discoveryv1.EndpointSlice) int { return cmp.Compare(a.Name, b.Name) })
	return in
}

// programmedServices returns the builder of the list of every programmed Service, ordered by
// key. After a refresh that converted every Service (fresh: the programmed ones) it is that
// refresh's list. Otherwise the store keeps no copy of what it handed the dataplanes, and the
// first sync that asks converts every programmed Service again from the store as it is then (a
// Service changed since the refresh is listed as it is now, still marked dirty, and the next
// refresh hands it over again unchanged); syncs that keep asking get that list patched with
// what each refresh converted (every).
func (s *store) programmedServices(fresh []dataplane.Service) func() []dataplane.Service {
	var list []dataplane.Service
	return func() []dataplane.Service {
		if list != nil {
			return list
		}
		if fresh != nil {
			list = slices.Clone(fresh)
			slices.SortFunc(list, func(a, b dataplane.Service) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
			return list
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.everyUsed = true
		if s.order == nil {
			s.order = make([]types.NamespacedName, 0, len(s.converted))
			for key := range s.converted {
				s.order = append(s.order, key)
			}
			slices.SortFunc(s.order, func(a, b types.NamespacedName) int {
				return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
			})
		}
		if s.every == nil {
			s.every = make(map[types.NamespacedName]dataplane.Service, s.counts.programmed)
			for key, c := range s.converted {
				if !c.skipped {
					if c := Convert(s.inputsLocked(key), s.node); c.Skip == "" {
						s.every[key] = c.Service
					}
				}
			}
		}
		list = make([]dataplane.Service, 0, len(s.every))
		for _, key := range s.order {
			if svc, ok := s.every[key]; ok {
				list = append(list, svc)
			}
		}
		return list
	}
}

// restoreTriggers puts back trigger times of a sync that failed and marks
// their Services dirty again, so the retry converts them and observes the
// times once it programs them.
func (s *store) restoreTriggers(triggers map[types.NamespacedName][]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, t := range triggers {
		s.triggers[key] = append(t, s.triggers[key]...)
		s.markLocked(key)
	}
}

// hasDirty reports whether anything waits for a sync.
func (s *store) hasDirty() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.allDirty || len(s.dirty) > 0
}
