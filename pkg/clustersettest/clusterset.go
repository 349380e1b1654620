// Package clustersettest starts a ClusterSet in the test process, for suites that ask "when I
// export this Service in cluster A, what does cluster B import?".
//
// A ClusterSet here is a broker and N member control planes (etcd and kube-apiserver, started
// by controller-runtime's envtest from $KUBEBUILDER_ASSETS), with every CRD installed, the
// broker prepared as `fleetslice up` prepares it (namespace, RBAC, admission policies, one
// identity per member), and fleetslice's real controllers running in-process against each
// member: the EndpointSlice controller and the multi-cluster services controllers, set up by
// the same functions cmd/manager calls. Envtest runs no kubelet or scheduler, so the package
// creates Nodes with zones and CPU and offers helpers to create Pods that are scheduled, running
// and ready on them.
//
// A suite starts one ClusterSet and shares it between specs, using a fresh namespace per spec
// (CreateNamespace), because starting control planes takes seconds:
//
//	cs, err := clustersettest.Start(ctx, clustersettest.Options{Members: []string{"east", "west"}})
//	defer cs.Stop()
//
// Stop ends every process, listener and goroutine Start began and removes their temporary
// directories.
package clustersettest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// Defaults of Options.
var (
	DefaultMembers = []string{"cluster-a", "cluster-b"}
	DefaultZones   = []string{"zone-a", "zone-b", "zone-c"}
)

const (
	// DefaultLeaseDuration is short so that a lost member is noticed within seconds.
	DefaultLeaseDuration = 4 * time.Second
	// DefaultRenewInterval renews well within DefaultLeaseDuration even on a loaded CI machine.
	DefaultRenewInterval = time.Second
	// DefaultWaitTimeout bounds the Wait helpers.
	DefaultWaitTimeout = 30 * time.Second
	// DefaultNodeCPU is each Node's allocatable CPU.
	DefaultNodeCPU = "4"
)

// Options shape a ClusterSet. The zero value starts two members, cluster-a and cluster-b, with
// one Node in each of zone-a, zone-b and zone-c.
type Options struct {
	// Members are the member clusters' ids (DNS labels); default DefaultMembers.
	Members []string
	// Zones get NodesPerZone Nodes each in every member; default DefaultZones.
	Zones []string
	// NodesPerZone defaults to 1.
	NodesPerZone int
	// NodeCPU is each Node's allocatable CPU, which CPU-proportional topology hints divide
	// traffic by; default DefaultNodeCPU.
	NodeCPU string
	// BrokerNamespace is the ClusterSet's namespace in the broker; default
	// multicluster.DefaultNamespace.
	BrokerNamespace string
	// LeaseDuration and RenewInterval of every member's broker Lease; defaults
	// DefaultLeaseDuration and DefaultRenewInterval.
	LeaseDuration time.Duration
	RenewInterval time.Duration
	// EndpointSlices configures each member's EndpointSlice controller; nil means
	// endpointslice.DefaultOptions().
	EndpointSlices *endpointslice.Options
	// WithoutEndpointSliceController runs only the multi-cluster controllers, for suites that
	// write a Service's EndpointSlices themselves.
	WithoutEndpointSliceController bool
	// IDsByFlag lists members given their id as the manager's --cluster-id flag does, without a
	// ClusterProperty; the others find it in their ClusterProperty, as `kubectl fleetslice join`
	// writes it.
	IDsByFlag []string
	// CuttableBrokerLinks routes each member's connection to the broker through a local proxy,
	// so that Member.CutBroker can partition it from the broker.
	CuttableBrokerLinks bool
	// WaitTimeout bounds each Wait helper and the start of controllers; default
	// DefaultWaitTimeout.
	WaitTimeout time.Duration
	// Logger receives the controllers' logs, one name per member; default none.
	Logger logr.Logger
}

func (o Options) withDefaults() Options {
	if len(o.Members) == 0 {
		o.Members = DefaultMembers
	}
	if len(o.Zones) == 0 {
		o.Zones = DefaultZones
	}
	if o.NodesPerZone == 0 {
		o.NodesPerZone = 1
	}
	if o.NodeCPU == "" {
		o.NodeCPU = DefaultNodeCPU
	}
	if o.BrokerNamespace == "" {
		o.BrokerNamespace = multicluster.DefaultNamespace
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewInterval == 0 {
		o.RenewInterval = DefaultRenewInterval
	}
	if o.EndpointSlices == nil {
		defaults := endpointslice.DefaultOptions()
		o.EndpointSlices = &defaults
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

func (o Options) validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, id := range o.Members {
		if err := clusterid.Validate(id); err != nil {
			errs = append(errs, err)
		}
		if seen[id] {
			errs = append(errs, fmt.Errorf("member %q is listed twice", id))
		}
		seen[id] = true
	}
	for _, id := range o.IDsByFlag {
		if !seen[id] {
			errs = append(errs, fmt.Errorf("IDsByFlag names %q, which is not a member", id))
		}
	}
	if o.NodesPerZone < 0 {
		errs = append(errs, fmt.Errorf("NodesPerZone %d is negative", o.NodesPerZone))
	}
	if _, err := resource.ParseQuantity(o.NodeCPU); err != nil {
		errs = append(errs, fmt.Errorf("NodeCPU %q: %w", o.NodeCPU, err))
	}
	if err := o.EndpointSlices.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Broker is the ClusterSet's broker control plane, reached with admin rights.
type Broker struct {
	Config *rest.Config
	Client client.Client
	// Namespace holds the ClusterSet's objects: records, slice copies and Leases.
	Namespace string
	env       *testenv.Cluster
}

// ClusterSet is a running broker and its members.
type ClusterSet struct {
	Broker  *Broker
	Members []*Member
	// StartedIn is how long Start took, from the first process to every member's first Lease;
	// ControlPlanesIn is the part spent starting etcd and kube-apiserver, usually the most.
	StartedIn, ControlPlanesIn time.Duration

	opts     Options
	stopOnce sync.Once
	stopErr  error
}

// Member returns the member with the given id, or nil.
func (cs *ClusterSet) Member(id string) *Member {
	for _, m := range cs.Members {
		if m.Name == id {
			return m
		}
	}
	return nil
}

// Start launches the broker and the members' control planes in parallel, prepares the broker,
// creates each member's Nodes and ClusterProperty, and starts every member's controllers. It
// returns once every member has renewed its Lease in the broker. ctx bounds the start only; the
// controllers run until Stop. Whatever fails, nothing is left running.
func Start(ctx context.Context, opts Options) (_ *ClusterSet, err error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("clustersettest options: %w", err)
	}
	began := time.Now()
	cs := &ClusterSet{opts: opts}
	defer func() {
		// Whatever started is stopped: control planes, links and controllers.
		if err != nil {
			err = errors.Join(err, cs.Stop())
		}
	}()

	envs, err := testenv.StartClusterSet(opts.Members)
	cs.adopt(envs, opts)
	if err != nil {
		return nil, err
	}
	cs.ControlPlanesIn = time.Since(began)

	var wg sync.WaitGroup
	errs := make([]error, len(cs.Members)+1)
	var kubeconfigs map[string][]byte
	wg.Go(func() {
		kubeconfigs, errs[0] = broker.Prepare(ctx, cs.Broker.Config, opts.BrokerNamespace, opts.Members, broker.Options{})
	})
	for i, m := range cs.Members {
		wg.Go(func() { errs[i+1] = m.prepare(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	brokerURL, err := url.Parse(cs.Broker.Config.Host)
	if err != nil {
		return nil, err
	}
	for _, m := range cs.Members {
		if err := m.connect(kubeconfigs[m.Name], brokerURL.Host); err != nil {
			return nil, err
		}
	}
	if err := cs.StartControllers(ctx); err != nil {
		return nil, err
	}
	cs.StartedIn = time.Since(began)
	return cs, nil
}

// StartControllers starts every member's controllers at once, as a fleet's rollout or a
// broker's return does, and returns when each has renewed its Lease (Member.StartControllers).
// Started one after another, the first member would see the others' old Leases, without the
// announcement of a first publication, and take their exports as complete.
func (cs *ClusterSet) StartControllers(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(cs.Members))
	for i, m := range cs.Members {
		wg.Go(func() { errs[i] = m.StartControllers(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// adopt records the started control planes so that Stop stops them.
func (cs *ClusterSet) adopt(envs []*testenv.Cluster, opts Options) {
	if len(envs) == 0 {
		return
	}
	if env := envs[len(envs)-1]; env != nil {
		cs.Broker = &Broker{Config: env.Config, Client: env.Client, Namespace: opts.BrokerNamespace, env: env}
	}
	for i, env := range envs[:len(envs)-1] {
		if env == nil {
			continue
		}
		cs.Members = append(cs.Members, &Member{
			Name: opts.Members[i], Config: env.Config, Client: env.Client,
			index: i, idByFlag: slices.Contains(opts.IDsByFlag, opts.Members[i]),
			opts: opts, env: env,
		})
	}
}

// Stop stops every member's controllers, closes the broker links and stops every control plane,
// removing their data. It waits for all of it and may be called more than once.
func (cs *ClusterSet) Stop() error {
	if cs == nil {
		return nil
	}
	cs.stopOnce.Do(func() {
		var errs []error
		for _, m := range cs.Members {
			errs = append(errs, m.StopControllers())
			if m.proxy != nil {
				m.proxy.Close()
			}
		}
		envs := []*testenv.Cluster{}
		for _, m := range cs.Members {
			envs = append(envs, m.env)
		}
		if cs.Broker != nil {
			envs = append(envs, cs.Broker.env)
		}
		stopErrs := make([]error, len(envs))
		var wg sync.WaitGroup
		for i, env := range envs {
			wg.Go(func() { stopErrs[i] = env.Stop() })
		}
		wg.Wait()
		cs.stopErr = errors.Join(append(errs, stopErrs...)...)
	})
	return cs.stopErr
}

// CreateNamespace creates a namespace of one random name, with the given prefix, in every
// member: multi-cluster services join Services of the same name in namespaces of the same name.
func (cs *ClusterSet) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	name := prefix + randomSuffix()
	for _, m := range cs.Members {
		if err := m.createNamespace(ctx, name); err != nil {
			return "", err
		}
	}
	return name, nil
}
