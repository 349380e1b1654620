package apiclient

import (
	"net/http"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// MapperProvider is controller-runtime's dynamic REST mapper, answering the RESTMapping of a kind
// it has mapped once from memory. Every request the client makes and every cache List asks the
// mapper whether the kind is namespaced, and the dynamic mapper answers by walking the mappings
// of every API group the server has: 6 to 8% of a manager's CPU in the multicluster bench's bulk
// start and join. Set it as the manager's and the broker cluster's MapperProvider.
func MapperProvider(cfg *rest.Config, httpClient *http.Client) (meta.RESTMapper, error) {
	dynamic, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	return RememberMappings(dynamic), nil
}

// RememberMappings answers RESTMapping from memory once mapper has answered it for the same kind
// and versions. Only answers are kept, never errors, so a kind that is not served yet (a CRD
// installed after the manager started) is looked up again each time until it is. An answer is
// kept for the process's life: the dynamic mapper also keeps a group's mappings until a lookup
// in that group fails, and the kinds a manager writes are built-in ones and its own CRDs, whose
// scope and resource name do not change under it.
func RememberMappings(mapper meta.RESTMapper) meta.RESTMapper {
	return &rememberingMapper{RESTMapper: mapper, known: map[mappingKey]meta.RESTMapping{}}
}

type mappingKey struct {
	kind     schema.GroupKind
	versions string
}

type rememberingMapper struct {
	meta.RESTMapper

	mu    sync.RWMutex
	known map[mappingKey]meta.RESTMapping
}

func (m *rememberingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	key := mappingKey{kind: gk, versions: strings.Join(versions, ",")}
	m.mu.RLock()
	known, ok := m.known[key]
	m.mu.RUnlock()
	if ok {
		return &known, nil // a copy: callers may not change what later callers get
	}
	mapping, err := m.RESTMapper.RESTMapping(gk, versions...)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.known[key] = *mapping
	m.mu.Unlock()
	return mapping, nil
}
