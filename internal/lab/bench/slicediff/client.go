package slicediff

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
)

// storeClient is the client fleetslice's reconciler reads and writes through: reads behave like
// the manager's informer cache (copies unless UnsafeDisableDeepCopy, field selectors answered
// from the reconciler's own field indexes), writes go to the store and are counted.
//
// controller-runtime's fake client would do, but it round-trips every read object through JSON,
// which at 10,000 Pods would dwarf the reconciler's own CPU time and make the comparison with
// upstream, whose reads are plain lister lookups, meaningless.
type storeClient struct {
	// Client answers only scheme and REST-mapping questions; its own object store stays empty,
	// so a call this bench does not expect fails instead of silently succeeding elsewhere.
	client.Client
	store   *store
	indexes map[string]endpointslice.FieldIndex
}

// WritesOneAtATime asks slicewrite.Apply for one write at a time in its plan's order: writes to
// this store cost no round trip, so side-by-side writes would buy nothing and only make the names
// and resourceVersions it hands out, and with them a replay's bytes, vary from run to run. It also
// keeps the store, which is not safe for concurrent use, to one caller: the bench syncs one
// Service at a time.
func (c *storeClient) WritesOneAtATime() bool { return true }

func newStoreClient(s *store) *storeClient {
	c := &storeClient{
		Client:  fake.NewClientBuilder().WithScheme(clientgoscheme.Scheme).Build(),
		store:   s,
		indexes: map[string]endpointslice.FieldIndex{},
	}
	for _, ix := range endpointslice.FieldIndexes() {
		c.indexes[ix.Field] = ix
	}
	return c
}

func (c *storeClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	notFound := func(resource string) error {
		return apierrors.NewNotFound(corev1.Resource(resource), key.Name)
	}
	switch o := obj.(type) {
	case *corev1.Service:
		v := c.store.services.get(key)
		if v == nil {
			return notFound("services")
		}
		v.DeepCopyInto(o)
	case *corev1.Pod:
		v := c.store.pods.get(key)
		if v == nil {
			return notFound("pods")
		}
		v.DeepCopyInto(o)
	case *corev1.Node:
		v := c.store.nodes.get(key)
		if v == nil {
			return notFound("nodes")
		}
		v.DeepCopyInto(o)
	case *discoveryv1.EndpointSlice:
		v := c.store.slices.get(key)
		if v == nil {
			return apierrors.NewNotFound(discoveryv1.Resource("endpointslices"), key.Name)
		}
		v.DeepCopyInto(o)
	default:
		return fmt.Errorf("the bench store does not serve %T", obj)
	}
	return nil
}

func (c *storeClient) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	// A failed list leaves the caller's list untouched, as a real client does.
	switch l := list.(type) {
	case *corev1.ServiceList:
		return fill(&l.Items, c, &c.store.services, lo, (*corev1.Service).DeepCopy)
	case *corev1.PodList:
		return fill(&l.Items, c, &c.store.pods, lo, (*corev1.Pod).DeepCopy)
	case *corev1.NodeList:
		return fill(&l.Items, c, &c.store.nodes, lo, (*corev1.Node).DeepCopy)
	case *discoveryv1.EndpointSliceList:
		return fill(&l.Items, c, &c.store.slices, lo, (*discoveryv1.EndpointSlice).DeepCopy)
	}
	return fmt.Errorf("the bench store does not serve %T", list)
}

func fill[T any, P interface {
	*T
	client.Object
}](items *[]T, c *storeClient, set *ordered[T], lo *client.ListOptions, deepCopy func(*T) *T) error {
	out, err := collect[T, P](c, set, lo, deepCopy)
	if err != nil {
		return err
	}
	*items = out
	return nil
}

// collect lists the objects of one kind matching lo, copied unless lo disables copying, the way
// the informer cache hands them out.
func collect[T any, P interface {
	*T
	client.Object
}](c *storeClient, set *ordered[T], lo *client.ListOptions, deepCopy func(*T) *T) ([]T, error) {
	shared := lo.UnsafeDisableDeepCopy != nil && *lo.UnsafeDisableDeepCopy
	var matched []*T
	var err error
	set.each(func(obj *T) {
		if err != nil {
			return
		}
		ok, mErr := c.matches(P(obj), lo)
		if mErr != nil {
			err = mErr
		} else if ok {
			matched = append(matched, obj)
		}
	})
	if err != nil {
		return nil, err
	}
	// Like the cache, fill a list of exactly the matching length: copies of the shared
	// objects, or the objects themselves when the caller promised not to modify them.
	out := make([]T, len(matched))
	for i, obj := range matched {
		if shared {
			out[i] = *obj
		} else {
			out[i] = *deepCopy(obj)
		}
	}
	return out, nil
}

func (c *storeClient) matches(obj client.Object, lo *client.ListOptions) (bool, error) {
	if lo.Namespace != "" && obj.GetNamespace() != lo.Namespace {
		return false, nil
	}
	if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
		return false, nil
	}
	if lo.FieldSelector == nil || lo.FieldSelector.Empty() {
		return true, nil
	}
	for _, req := range lo.FieldSelector.Requirements() {
		ix, ok := c.indexes[req.Field]
		if !ok || reflect.TypeOf(ix.Object) != reflect.TypeOf(obj) {
			return false, fmt.Errorf("field selector %q: no such index for %T", req.Field, obj)
		}
		if req.Operator != selection.Equals && req.Operator != selection.DoubleEquals {
			return false, fmt.Errorf("field selector %q: only equality is indexed", req.Field)
		}
		if !slices.Contains(ix.Extract(obj), req.Value) {
			return false, nil
		}
	}
	return true, nil
}

func (c *storeClient) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return fmt.Errorf("the bench store takes controller writes of EndpointSlices only, not %T", obj)
	}
	out, err := c.store.createSlice(slice)
	if err != nil {
		return err
	}
	*slice = *out
	return nil
}

func (c *storeClient) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	slice, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return fmt.Errorf("the bench store takes controller writes of EndpointSlices only, not %T", obj)
	}
	out, err := c.store.updateSlice(slice)
	if err != nil {
		return err
	}
	*slice = *out
	return nil
}

func (c *storeClient) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if _, ok := obj.(*discoveryv1.EndpointSlice); !ok {
		return fmt.Errorf("the bench store takes controller writes of EndpointSlices only, not %T", obj)
	}
	do := (&client.DeleteOptions{}).ApplyOptions(opts)
	var uid *types.UID
	if do.Preconditions != nil {
		uid = do.Preconditions.UID
	}
	return c.store.deleteSlice(client.ObjectKeyFromObject(obj), uid)
}

func (c *storeClient) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return fmt.Errorf("the bench store does not take patches")
}

func (c *storeClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return fmt.Errorf("the bench store does not take server-side apply")
}

func (c *storeClient) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return fmt.Errorf("the bench store does not take collection deletes")
}
