package multicluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/multicluster/brokercreds"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/controllers/reconnect"
)

// Setup adds the multi-cluster controllers of this member to mgr: a cache of the broker
// namespace, the Lease renewer, and the membership, export and import controllers. The
// manager's scheme must know the core, discovery and mcs-api v1beta1 types. The cluster id is
// resolved from the ClusterProperty (falling back to opts.ClusterID) before anything starts;
// ctx (the manager's, e.g. from ctrl.SetupSignalHandler) bounds that read and the index setup.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) error {
	// The manager validated its flags already; a library caller gets the same refusal here
	// instead of a controller that cannot run.
	if err := opts.Validate(); err != nil {
		return err
	}
	creds, cachedConfig, directConfig, err := brokerConfigs(&opts)
	if err != nil {
		return err
	}
	self, err := clusterid.Resolve(ctx, mgr.GetAPIReader(), opts.ClusterID)
	if err != nil {
		return err
	}
	w := &wiring{mgr: mgr, opts: opts, self: self, leaving: &atomic.Bool{}, outage: newBrokerOutage(),
		log:      mgr.GetLogger().WithName("multicluster").WithValues("member", self),
		recorder: mgr.GetEventRecorder("fleetslice-multicluster")}
	direct, err := w.connectBroker(ctx, cachedConfig, directConfig)
	if err != nil {
		return err
	}
	creds.self, creds.reader, creds.elected, creds.now = self, mgr.GetAPIReader(), mgr.Elected(), time.Now
	creds.recorder, creds.log = w.recorder, w.log.WithName("credentials")
	if err := mgr.Add(creds); err != nil {
		return err
	}
	w.members = newMembership(self, opts.BrokerNamespace, opts.LeaseDuration, w.broker.GetClient())
	w.members.withdraw = withdrawer{reader: mgr.GetClient(), writer: mgr.GetClient()}.withdraw
	w.members.initialWait = opts.InitialExportsWait
	w.first = newFirstExports(mgr.GetClient(), opts.InitialExportsWait, w.log.WithName("first-exports"))
	if err := mgr.Add(w.first); err != nil {
		return err
	}
	if err := mgr.Add(&leaseRenewer{
		reader: direct, writer: direct,
		namespace: opts.BrokerNamespace, self: self,
		duration: opts.LeaseDuration, interval: opts.renewEvery(), writeTimeout: opts.BrokerWriteTimeout,
		leaveOnShutdown: opts.LeaveOnShutdown, leaving: w.leaving,
		log: w.log.WithName("lease"), demand: nodeDemand(mgr.GetClient(), mgr.GetAPIReader()), first: w.first,
		outage: w.outage,
	}); err != nil {
		return err
	}
	for _, add := range []func() error{w.addMembership, w.addExports, w.addImports} {
		if err := add(); err != nil {
			return err
		}
	}
	w.log.Info("multi-cluster controllers set up", "brokerNamespace", opts.BrokerNamespace,
		"leaseDuration", opts.LeaseDuration, "renewInterval", opts.renewEvery(), "leaveOnShutdown", opts.LeaveOnShutdown)
	return nil
}

// wiring is what the member's controllers are built from.
type wiring struct {
	mgr      ctrl.Manager
	opts     Options
	self     string
	log      logr.Logger
	recorder events.EventRecorder
	broker   cluster.Cluster
	members  *membership
	first    *firstExports
	leaving  *atomic.Bool
	outage   *brokerOutage
}

// brokerConfigs reads the broker kubeconfig and returns the credentials watcher and two
// configs with their own limiters: the cached client's bulk writes must not queue the Lease
// renewals that keep this member alive in its peers' eyes.
func brokerConfigs(opts *Options) (creds *credentialsWatcher, cached, direct *rest.Config, err error) {
	creds = &credentialsWatcher{interval: opts.CredentialsCheckInterval,
		policy: brokercreds.Policy{WarnBefore: opts.CredentialsWarning, Rewarn: time.Hour}}
	if opts.BrokerConfig == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.BrokerKubeconfig)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading the broker kubeconfig %s: %w", opts.BrokerKubeconfig, err)
		}
		creds.path, creds.last = opts.BrokerKubeconfig, readOrNil(opts.BrokerKubeconfig)
		opts.BrokerConfig = cfg
	}
	creds.current = rest.CopyConfig(opts.BrokerConfig)
	brokerConfig := rest.CopyConfig(opts.BrokerConfig)
	if creds.path != "" {
		creds.token = swappableToken(brokerConfig)
	}
	cached, direct = rest.CopyConfig(brokerConfig), rest.CopyConfig(brokerConfig)
	if err := apiclient.Throttle(cached, "broker", opts.BrokerQPS, opts.BrokerBurst); err != nil {
		return nil, nil, nil, err
	}
	if err := apiclient.Throttle(direct, "broker-lease", opts.BrokerQPS, opts.BrokerBurst); err != nil {
		return nil, nil, nil, err
	}
	return creds, cached, direct, nil
}

// connectBroker adds the cache of the broker namespace and the field indexes, and returns the
// direct broker client: leaving must work while the manager's caches shut down.
func (w *wiring) connectBroker(ctx context.Context, cachedConfig, directConfig *rest.Config) (client.Client, error) {
	brokerScheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	direct, err := client.New(directConfig, client.Options{Scheme: brokerScheme})
	if err != nil {
		return nil, fmt.Errorf("broker client: %w", err)
	}
	lease := client.ObjectKey{Namespace: w.opts.BrokerNamespace, Name: liveness.LeaseName(w.self)}
	interval := w.opts.ReconnectProbeInterval
	if interval == 0 {
		interval = DefaultReconnectProbeInterval
	}
	gate := &reconnect.Gate{Server: "broker", Interval: interval, Answered: w.outage.observe,
		Probe: func(ctx context.Context) error { return direct.Get(ctx, lease, &coordinationv1.Lease{}) }}
	w.broker, err = cluster.New(cachedConfig, w.brokerClusterOptions(brokerScheme, gate))
	if err != nil {
		return nil, fmt.Errorf("broker cluster: %w", err)
	}
	if err := w.mgr.Add(w.broker); err != nil {
		return nil, err
	}
	if err := addIndexes(ctx, w.mgr.GetFieldIndexer(), w.broker.GetFieldIndexer()); err != nil {
		return nil, fmt.Errorf("field indexes: %w", err)
	}
	return direct, nil
}

// brokerClusterOptions shape the broker cluster: its cache holds the broker namespace only and
// waits out an outage at gate.
func (w *wiring) brokerClusterOptions(scheme *runtime.Scheme, gate *reconnect.Gate) cluster.Option {
	return func(o *cluster.Options) {
		o.Scheme = scheme
		o.Logger = w.log.WithName("broker")
		o.MapperProvider = apiclient.MapperProvider
		o.Cache.DefaultNamespaces = map[string]cache.Config{w.opts.BrokerNamespace: {}}
		// Every member's records and slice copies, as the member cache keeps its own objects:
		// nothing reads who wrote which field, and an update sent without managed fields
		// keeps the ones the broker has.
		o.Cache.DefaultTransform = cache.TransformStripManagedFields()
		o.Cache.NewInformer = gate.NewInformer
	}
}

func (w *wiring) controllerOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: w.opts.MaxConcurrentReconciles,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, w.opts.MaxRetryDelay),
	}
}

func (w *wiring) addMembership() error {
	err := ctrl.NewControllerManagedBy(w.mgr).
		Named("multicluster-membership").
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Kind(w.broker.GetCache(), &coordinationv1.Lease{},
			handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *coordinationv1.Lease) []reconcile.Request {
				return []reconcile.Request{membershipKey}
			}))).
		Complete(w.members)
	if err != nil {
		return fmt.Errorf("membership controller: %w", err)
	}
	return nil
}

func (w *wiring) addExports() error {
	exports := &exportReconciler{
		local: w.mgr.GetClient(), broker: w.broker.GetClient(), brokerNamespace: w.opts.BrokerNamespace,
		self: w.self, members: w.members, recorder: w.recorder, leaving: w.leaving, writeTimeout: w.opts.BrokerWriteTimeout,
		first: w.first, written: newWrittenSlices(), outage: w.outage, outageGrace: w.opts.BrokerOutageGrace, refusalGrace: brokerRefusalGrace,
	}
	brokerCache := w.broker.GetCache()
	err := ctrl.NewControllerManagedBy(w.mgr).
		Named("multicluster-export").
		WithOptions(w.controllerOptions()).
		For(&mcsv1beta1.ServiceExport{}).
		Watches(&corev1.Service{}, &handler.EnqueueRequestForObject{}).
		Watches(&discoveryv1.EndpointSlice{}, endpointChangesFirst(sourceSliceToService)).
		WatchesRawSource(brokerKind(brokerCache, &v1alpha1.ServiceExportRecord{},
			handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*v1alpha1.ServiceExportRecord]("")))).
		WatchesRawSource(brokerKind(brokerCache, &discoveryv1.EndpointSlice{},
			handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*discoveryv1.EndpointSlice](w.self)))).
		WatchesRawSource(source.Channel(w.members.subscribeLiveness(), servicesOfAnnouncedCluster(w.broker.GetClient(), w.opts.BrokerNamespace))).
		WatchesRawSource(source.Channel(w.outage.resumedExports(), &handler.EnqueueRequestForObject{})).
		Complete(exports)
	if err != nil {
		return fmt.Errorf("export controller: %w", err)
	}
	return nil
}

// newImportReconciler builds the import controller's reconciler from the member's options.
func newImportReconciler(opts Options, self string, local, broker client.Client, members *membership, recorder events.EventRecorder) *importReconciler {
	return &importReconciler{
		local: local, broker: broker, brokerNamespace: opts.BrokerNamespace, self: self, members: members,
		recorder: recorder, locality: opts.Locality, selection: opts.ClusterSelection,
		written: newWrittenSlices(),
	}
}

func (w *wiring) addImports() error {
	imports := newImportReconciler(w.opts, w.self, w.mgr.GetClient(), w.broker.GetClient(), w.members, w.recorder)
	brokerCache := w.broker.GetCache()
	demandHandler, demandChanged := demandChanges(w.mgr.GetClient())
	err := ctrl.NewControllerManagedBy(w.mgr).
		Named("multicluster-import").
		WithOptions(w.controllerOptions()).
		For(&mcsv1beta1.ServiceImport{}).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(derivedToImport)).
		Watches(&discoveryv1.EndpointSlice{}, endpointChangesFirst(imports.sliceToImport)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(imports.namespaceToImports)).
		WatchesRawSource(brokerKind(brokerCache, &v1alpha1.ServiceExportRecord{},
			handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*v1alpha1.ServiceExportRecord]("")))).
		WatchesRawSource(brokerKind(brokerCache, &discoveryv1.EndpointSlice{}, endpointChangesFirst(imports.copyToImport))).
		WatchesRawSource(source.Channel(w.members.subscribe(), servicesOfAnnouncedCluster(w.broker.GetClient(), w.opts.BrokerNamespace))).
		WatchesRawSource(source.Kind(brokerCache, &coordinationv1.Lease{}, demandHandler, demandChanged)).
		Complete(imports)
	if err != nil {
		return fmt.Errorf("import controller: %w", err)
	}
	return nil
}
