package clustersettest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// Member is one member cluster of the ClusterSet.
type Member struct {
	// Name is the member's cluster id.
	Name string
	// Config and Client reach the member's API server with admin rights.
	Config *rest.Config
	Client client.Client
	// BrokerConfig authenticates as the member's own broker identity, as its controllers do
	// (through the cuttable link when Options.CuttableBrokerLinks is set).
	BrokerConfig *rest.Config
	// BrokerClient acts in the broker as this member, directly, never through the cuttable link:
	// what the member's RBAC and the broker's admission policies let it do.
	BrokerClient client.Client
	// Nodes are the member's Node names by zone.
	Nodes map[string][]string

	index    int
	idByFlag bool
	opts     Options
	env      *testenv.Cluster
	proxy    *cuttableProxy
	ips      ipAllocator

	mu       sync.Mutex
	stop     context.CancelFunc
	done     chan error
	lastOpts multicluster.Options
	started  bool
}

// prepare creates the member's Nodes and, unless its id is given by flag, its ClusterProperty.
func (m *Member) prepare(ctx context.Context) error {
	if err := m.createNodes(ctx); err != nil {
		return fmt.Errorf("member %s: %w", m.Name, err)
	}
	if m.idByFlag {
		return nil
	}
	if err := clusterid.Ensure(ctx, m.Client, m.Name); err != nil {
		return fmt.Errorf("member %s: writing its ClusterProperty: %w", m.Name, err)
	}
	return nil
}

// connect builds the member's broker identity from the kubeconfig the broker issued, and its
// cuttable link when asked for.
func (m *Member) connect(kubeconfig []byte, brokerHost string) error {
	direct, err := broker.RESTConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("member %s: broker kubeconfig: %w", m.Name, err)
	}
	scheme, err := testenv.Scheme()
	if err != nil {
		return err
	}
	if m.BrokerClient, err = client.New(direct, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	m.BrokerConfig = rest.CopyConfig(direct)
	if m.opts.CuttableBrokerLinks {
		if m.proxy, err = newCuttableProxy(brokerHost); err != nil {
			return err
		}
		m.BrokerConfig.Host = "https://" + m.proxy.Addr()
	}
	return nil
}

// StartControllers runs the member's controllers in a new manager, set up as cmd/manager sets
// them up, until StopControllers. The multi-cluster options are the ClusterSet's, changed by
// tweaks (for example LeaveOnShutdown). Unless the broker link is cut, it returns once the
// member's Lease has been renewed by the new manager.
func (m *Member) StartControllers(ctx context.Context, tweaks ...func(*multicluster.Options)) error {
	opts := multicluster.DefaultOptions()
	opts.BrokerConfig = m.BrokerConfig
	opts.BrokerNamespace = m.opts.BrokerNamespace
	opts.LeaseDuration = m.opts.LeaseDuration
	opts.RenewInterval = m.opts.RenewInterval
	if m.idByFlag {
		opts.ClusterID = m.Name
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	return m.start(ctx, opts)
}

func (m *Member) start(ctx context.Context, opts multicluster.Options) error {
	m.mu.Lock()
	running := m.stop != nil
	m.mu.Unlock()
	if running {
		return fmt.Errorf("member %s: controllers already running", m.Name)
	}
	scheme, err := testenv.Scheme()
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(m.Config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  endpointslice.CacheOptions(),
		// Every member runs controllers of the same names in this one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		Logger:     m.opts.Logger.WithName(m.Name),
	})
	if err != nil {
		return fmt.Errorf("member %s: manager: %w", m.Name, err)
	}
	// The manager outlives ctx, which only bounds the start.
	runCtx, cancel := context.WithCancel(context.Background())
	if err := m.setup(ctx, runCtx, mgr, opts); err != nil {
		cancel()
		return err
	}
	startedAt := time.Now()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	m.mu.Lock()
	m.stop, m.done, m.lastOpts, m.started = cancel, done, opts, true
	m.mu.Unlock()
	if m.proxy != nil && m.proxy.isCut() {
		return nil
	}
	return m.waitRenewed(ctx, startedAt, done)
}

// setup adds the controllers cmd/manager adds.
func (m *Member) setup(ctx, runCtx context.Context, mgr ctrl.Manager, opts multicluster.Options) error {
	if !m.opts.WithoutEndpointSliceController {
		slices, err := endpointslice.NewReconciler(mgr.GetClient(), mgr.GetEventRecorder("endpointslice-controller"), *m.opts.EndpointSlices)
		if err == nil {
			err = slices.SetupWithManager(runCtx, mgr)
		}
		if err != nil {
			return fmt.Errorf("member %s: EndpointSlice controller: %w", m.Name, err)
		}
	}
	setupCtx, cancel := context.WithCancel(runCtx)
	defer cancel()
	stop := context.AfterFunc(ctx, cancel)
	defer stop()
	if err := multicluster.Setup(setupCtx, mgr, opts); err != nil {
		return fmt.Errorf("member %s: multi-cluster controllers: %w", m.Name, err)
	}
	return nil
}

// waitRenewed waits until the member's Lease was renewed after since, or the manager failed.
func (m *Member) waitRenewed(ctx context.Context, since time.Time, done chan error) error {
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: m.opts.BrokerNamespace, Name: liveness.LeaseName(m.Name)}
	// The Lease API keeps microseconds: a renewal in the microsecond of since still counts, and
	// one from before it (the previous manager's hand-over) does not.
	since = since.Truncate(time.Microsecond)
	return m.wait(ctx, "its Lease renewed in the broker by its new controllers", func(ctx context.Context) (bool, string, error) {
		select {
		case err := <-done:
			done <- err
			return false, "", fmt.Errorf("the manager stopped: %v", err)
		default:
		}
		if err := m.BrokerClient.Get(ctx, key, lease); err != nil {
			return false, readFailure(ctx, err), nil
		}
		if lease.Spec.RenewTime == nil {
			return false, "a Lease never renewed", nil
		}
		seen := "renewed at " + lease.Spec.RenewTime.Format(time.RFC3339Nano)
		return !lease.Spec.RenewTime.Time.Before(since), seen, nil
	})
}

// StopControllers stops the member's manager and waits for it to end. Its Lease stays in the
// broker and lapses, unless the controllers were started with LeaveOnShutdown.
func (m *Member) StopControllers() error {
	m.mu.Lock()
	stop, done := m.stop, m.done
	m.stop, m.done = nil, nil
	m.mu.Unlock()
	if stop == nil {
		return nil
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("member %s: manager: %w", m.Name, err)
		}
		return nil
	case <-time.After(m.opts.WaitTimeout):
		return fmt.Errorf("member %s: manager still running %s after it was told to stop", m.Name, m.opts.WaitTimeout)
	}
}

// Running reports whether the member's controllers are running.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stop != nil
}

// Lose makes the member lost to its peers, as a crashed manager would be: its controllers stop
// and its Lease is no longer renewed, so the others withdraw its endpoints once the Lease lapses
// (Options.LeaseDuration). Its own objects stay. Revive brings it back.
func (m *Member) Lose() error {
	m.mu.Lock()
	leaves := m.stop != nil && m.lastOpts.LeaveOnShutdown
	m.mu.Unlock()
	if leaves {
		return fmt.Errorf("member %s runs with LeaveOnShutdown, so stopping it would leave the ClusterSet, not lose it", m.Name)
	}
	return m.StopControllers()
}

// Revive starts the member's controllers again with the options they last ran with.
func (m *Member) Revive(ctx context.Context) error {
	m.mu.Lock()
	opts, started := m.lastOpts, m.started
	m.mu.Unlock()
	if !started {
		return errors.New("member " + m.Name + " never ran")
	}
	return m.start(ctx, opts)
}

// CutBroker partitions the member from the broker: open connections, watches included, drop and
// new ones are refused, while the controllers keep running. It needs Options.CuttableBrokerLinks.
func (m *Member) CutBroker() error {
	if m.proxy == nil {
		return errNotCuttable
	}
	m.proxy.Cut()
	return nil
}

// RestoreBroker heals a CutBroker.
func (m *Member) RestoreBroker() error {
	if m.proxy == nil {
		return errNotCuttable
	}
	m.proxy.Restore()
	return nil
}
