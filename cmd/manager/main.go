// Command manager runs fleetslice's control-plane controllers in one controller-runtime manager.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/api/v1alpha1"
	"github.com/fleetslice/fleetslice/controllers/apiclient"
	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/reconnect"
	"github.com/fleetslice/fleetslice/pkg/version"
)

var scheme = runtime.NewScheme()

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(mcsv1beta1.Install(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
}

func main() {
	o := bindFlags(flag.CommandLine)
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.printVersion {
		fmt.Println("fleetslice manager", version.Version)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	brokerKubeconfig := o.mcs.BrokerKubeconfig
	notJoined, err := o.complete()
	if notJoined {
		log.Info("not joined to a ClusterSet: multi-cluster services are off until the broker kubeconfig exists (kubectl fleetslice join writes it)",
			"brokerKubeconfig", brokerKubeconfig)
	}
	if err != nil {
		log.Error(err, "invalid flags")
		os.Exit(2)
	}
	cfg, err := config.GetConfigWithContext(o.kubeContext)
	if err != nil {
		log.Error(err, "unable to load a kubeconfig")
		os.Exit(1)
	}
	apiclient.ForOwnCluster(cfg)
	if err := apiclient.Throttle(cfg, "member", float32(o.qps), o.burst); err != nil {
		log.Error(err, "invalid client flags")
		os.Exit(2)
	}
	gate, err := memberGate(cfg)
	if err != nil {
		log.Error(err, "unable to set up the member cache")
		os.Exit(1)
	}
	mgrOpts := o.managerOptions()
	mgrOpts.Cache.NewInformer = gate.NewInformer
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		log.Error(err, "unable to create manager")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := setupControllers(ctx, mgr, o); err != nil {
		log.Error(err, "unable to set up the controllers")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager exited with an error")
		os.Exit(1)
	}
}

func (o *options) managerOptions() ctrl.Options {
	return ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "manager.fleetslice.io",
		LeaderElectionNamespace: o.leaderNS,
		LeaseDuration:           &o.leaderLease,
		RenewDeadline:           &o.leaderRenew,
		RetryPeriod:             &o.leaderRetry,
		// main returns as soon as the manager stops, so releasing the lease then is safe, and it
		// lets the next replica of a rolling upgrade lead at once instead of after the lease runs out.
		LeaderElectionReleaseOnCancel: true,
		Cache:                         endpointslice.CacheOptions(),
		MapperProvider:                apiclient.MapperProvider,
	}
}

// memberGate is the gate of the member cache's informers: while this cluster's API server does
// not answer (a control-plane upgrade, a restart), their lists and watches wait at it, asking
// the server's /readyz, and go on as soon as it is ready, instead of sleeping through its return
// in client-go's reflector back-off (up to a minute).
func memberGate(cfg *rest.Config) (*reconnect.Gate, error) {
	probe, err := reconnect.Readyz(cfg)
	if err != nil {
		return nil, err
	}
	return &reconnect.Gate{Server: "member", Probe: probe, Interval: reconnect.DefaultProbeInterval}, nil
}

func setupControllers(ctx context.Context, mgr ctrl.Manager, o *options) error {
	slices, err := endpointslice.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("endpointslice-controller"), o.slices)
	if err == nil {
		err = slices.SetupWithManager(ctx, mgr)
	}
	if err != nil {
		return fmt.Errorf("EndpointSlice controller: %w", err)
	}
	if o.mcs.Enabled() {
		if err := multicluster.Setup(ctx, mgr, o.mcs); err != nil {
			return fmt.Errorf("multi-cluster services controllers: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	return mgr.AddReadyzCheck("readyz", healthz.Ping)
}
