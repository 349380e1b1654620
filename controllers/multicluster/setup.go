package multicluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
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
	creds := &credentialsWatcher{interval: opts.CredentialsCheckInterval,
		policy: brokercreds.Policy{WarnBefore: opts.CredentialsWarning, Rewarn: time.Hour}}
	if opts.BrokerConfig == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", opts.BrokerKubeconfig)
		if err != nil {
			return fmt.Errorf("reading the broker kubeconfig %s: %w", opts.BrokerKubeconfig, err)
		}
		creds.path, creds.last = opts.BrokerKubeconfig, readOrNil(opts.BrokerKubeconfig)
		opts.BrokerConfig = cfg
	}
	creds.current = rest.CopyConfig(opts.BrokerConfig)
	brokerConfig := rest.CopyConfig(opts.BrokerConfig)
	if creds.path != "" {
		creds.token = swappableToken(brokerConfig)
	}
	// Each client gets its own copy and limiter: the cached client's bulk writes must not queue
	// the Lease renewals that keep this member alive in its peers' eyes.
	cachedConfig, directConfig := rest.CopyConfig(brokerConfig), rest.CopyConfig(brokerConfig)
	if err := apiclient.Throttle(cachedConfig, "broker", opts.BrokerQPS, opts.BrokerBurst); err != nil {
		return err
	}
	if err := apiclient.Throttle(directConfig, "broker-lease", opts.BrokerQPS, opts.BrokerBurst); err != nil {
		return err
	}
	self, err := clusterid.Resolve(ctx, mgr.GetAPIReader(), opts.ClusterID)
	if err != nil {
		return err
	}
	log := mgr.GetLogger().WithName("multicluster").WithValues("member", self)

	brokerScheme, err := Scheme()
	if err != nil {
		return err
	}
	brokerCluster, err := cluster.New(cachedConfig, func(o *cluster.Options) {
		o.Scheme = brokerScheme
		o.Logger = log.WithName("broker")
		o.Cache.DefaultNamespaces = map[string]cache.Config{opts.BrokerNamespace: {}}
	})
	if err != nil {
		return fmt.Errorf("broker cluster: %w", err)
	}
	if err := mgr.Add(brokerCluster); err != nil {
		return err
	}
	if err := addIndexes(ctx, mgr.GetFieldIndexer(), brokerCluster.GetFieldIndexer()); err != nil {
		return fmt.Errorf("field indexes: %w", err)
	}
	// Leaving must work while the manager's caches shut down, so it reads the broker directly.
	direct, err := client.New(directConfig, client.Options{Scheme: brokerScheme})
	if err != nil {
		return fmt.Errorf("broker client: %w", err)
	}

	creds.self, creds.reader, creds.elected, creds.now = self, mgr.GetAPIReader(), mgr.Elected(), time.Now
	creds.recorder, creds.log = mgr.GetEventRecorder("fleetslice-multicluster"), log.WithName("credentials")
	if err := mgr.Add(creds); err != nil {
		return err
	}

	leaving := &atomic.Bool{}
	members := newMembership(self, opts.BrokerNamespace, opts.LeaseDuration, brokerCluster.GetClient())
	members.withdraw = withdrawer{reader: mgr.GetClient(), writer: mgr.GetClient()}.withdraw
	recorder := mgr.GetEventRecorder("fleetslice-multicluster")

	if err := mgr.Add(&leaseRenewer{
		reader: direct, writer: direct,
		namespace: opts.BrokerNamespace, self: self,
		duration: opts.LeaseDuration, interval: opts.renewEvery(), writeTimeout: opts.BrokerWriteTimeout,
		leaveOnShutdown: opts.LeaveOnShutdown, leaving: leaving,
		log: log.WithName("lease"), demand: nodeDemand(mgr.GetClient()),
	}); err != nil {
		return err
	}

	controllerOpts := controller.Options{
		MaxConcurrentReconciles: opts.MaxConcurrentReconciles,
		RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, opts.MaxRetryDelay),
	}
	brokerCache := brokerCluster.GetCache()

	err = ctrl.NewControllerManagedBy(mgr).
		Named("multicluster-membership").
		WithOptions(controller.Options{MaxConcurrentReconciles: 1}).
		WatchesRawSource(source.Kind(brokerCache, &coordinationv1.Lease{},
			handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *coordinationv1.Lease) []reconcile.Request {
				return []reconcile.Request{membershipKey}
			}))).
		Complete(members)
	if err != nil {
		return fmt.Errorf("membership controller: %w", err)
	}

	exports := &exportReconciler{
		local: mgr.GetClient(), broker: brokerCluster.GetClient(), brokerNamespace: opts.BrokerNamespace,
		self: self, members: members, recorder: recorder, leaving: leaving, writeTimeout: opts.BrokerWriteTimeout,
	}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("multicluster-export").
		WithOptions(controllerOpts).
		For(&mcsv1beta1.ServiceExport{}).
		Watches(&corev1.Service{}, &handler.EnqueueRequestForObject{}).
		Watches(&discoveryv1.EndpointSlice{}, endpointChangesFirst(sourceSliceToService)).
		WatchesRawSource(source.Kind(brokerCache, &v1alpha1.ServiceExportRecord{},
			handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*v1alpha1.ServiceExportRecord]("")))).
		WatchesRawSource(source.Kind(brokerCache, &discoveryv1.EndpointSlice{},
			handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*discoveryv1.EndpointSlice](self)))).
		WatchesRawSource(source.Channel(members.subscribe(), servicesOfAnnouncedCluster(brokerCluster.GetClient(), opts.BrokerNamespace))).
		Complete(exports)
	if err != nil {
		return fmt.Errorf("export controller: %w", err)
	}

	imports := &importReconciler{
		local: mgr.GetClient(), broker: brokerCluster.GetClient(), brokerNamespace: opts.BrokerNamespace,
		self: self, members: members, recorder: recorder, locality: opts.Locality,
	}
	demandHandler, demandChanged := demandChanges(mgr.GetClient())
	err = ctrl.NewControllerManagedBy(mgr).
		Named("multicluster-import").
		WithOptions(controllerOpts).
		For(&mcsv1beta1.ServiceImport{}).
		Owns(&corev1.Service{}).
		Watches(&discoveryv1.EndpointSlice{}, endpointChangesFirst(imports.sliceToImport)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(imports.namespaceToImports)).
		WatchesRawSource(source.Kind(brokerCache, &v1alpha1.ServiceExportRecord{},
			handler.TypedEnqueueRequestsFromMapFunc(brokerObjectToService[*v1alpha1.ServiceExportRecord]("")))).
		WatchesRawSource(source.Kind(brokerCache, &discoveryv1.EndpointSlice{},
			endpointChangesFirst(brokerObjectToService[*discoveryv1.EndpointSlice]("")))).
		WatchesRawSource(source.Channel(members.subscribe(), servicesOfAnnouncedCluster(brokerCluster.GetClient(), opts.BrokerNamespace))).
		WatchesRawSource(source.Kind(brokerCache, &coordinationv1.Lease{}, demandHandler, demandChanged)).
		Complete(imports)
	if err != nil {
		return fmt.Errorf("import controller: %w", err)
	}
	log.Info("multi-cluster controllers set up", "brokerNamespace", opts.BrokerNamespace,
		"leaseDuration", opts.LeaseDuration, "renewInterval", opts.renewEvery(), "leaveOnShutdown", opts.LeaveOnShutdown)
	return nil
}
