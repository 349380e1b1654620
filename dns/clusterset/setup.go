package clusterset

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	clog "github.com/coredns/coredns/plugin/pkg/log"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

var log = clog.NewWithPlugin(Name)

// maxTTL bounds the ttl option at an hour, as CoreDNS's kubernetes plugin does: imports change
// far more often than that.
const maxTTL = 3600

// defaultStartupTimeout is how long the server waits for the first lists before it serves
// anyway (answering SERVFAIL until they arrive).
const defaultStartupTimeout = 5 * time.Second

func init() { plugin.Register(Name, setup) }

// options is what a clusterset block of a Corefile says.
type options struct {
	zones          []string
	ttl            uint32
	kubeconfig     clientcmd.ClientConfig
	startupTimeout time.Duration
	fall           fall.F
}

func setup(c *caddy.Controller) error {
	opts, err := parse(c)
	if err != nil {
		return plugin.Error(Name, err)
	}
	cfg, err := restConfig(opts.kubeconfig)
	if err != nil {
		return plugin.Error(Name, err)
	}
	routeControllerRuntimeLogs()

	store := NewStore()
	ctx, cancel := context.WithCancel(context.Background())
	c.OnStartup(func() error {
		started := make(chan error, 1)
		go func() { started <- store.Run(ctx, cfg) }()
		select {
		case err := <-started:
			if err != nil && ctx.Err() == nil {
				return plugin.Error(Name, err)
			}
		case <-time.After(opts.startupTimeout):
			log.Warningf("ServiceImports not listed after %s; answering SERVFAIL until they are", opts.startupTimeout)
		}
		return nil
	})
	c.OnShutdown(func() error {
		cancel()
		return nil
	})

	dnsserver.GetConfig(c).AddPlugin(func(next plugin.Handler) plugin.Handler {
		return &Clusterset{Next: next, Zones: opts.zones, TTL: opts.ttl, Fall: opts.fall, Store: store}
	})
	return nil
}

// parse reads
//
//	clusterset [ZONES...] {
//	    kubeconfig PATH [CONTEXT]
//	    ttl SECONDS
//	    startup_timeout DURATION
//	    fallthrough [ZONES...]
//	}
func parse(c *caddy.Controller) (options, error) {
	opts := options{ttl: DefaultTTL, startupTimeout: defaultStartupTimeout}
	blocks := 0
	for c.Next() {
		if blocks++; blocks > 1 {
			return opts, errors.New("only one clusterset block per server block")
		}
		opts.zones = plugin.OriginsFromArgsOrServerBlock(c.RemainingArgs(), c.ServerBlockKeys)
		for c.NextBlock() {
			switch c.Val() {
			case "kubeconfig":
				args := c.RemainingArgs()
				if len(args) != 1 && len(args) != 2 {
					return opts, c.ArgErr()
				}
				overrides := &clientcmd.ConfigOverrides{}
				if len(args) == 2 {
					overrides.CurrentContext = args[1]
				}
				opts.kubeconfig = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
					&clientcmd.ClientConfigLoadingRules{ExplicitPath: args[0]}, overrides)
			case "ttl":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return opts, c.ArgErr()
				}
				ttl, err := strconv.ParseUint(args[0], 10, 32)
				if err != nil || ttl > maxTTL {
					return opts, c.Errf("ttl must be a whole number of seconds from 0 to %d, got %q", maxTTL, args[0])
				}
				opts.ttl = uint32(ttl)
			case "startup_timeout":
				args := c.RemainingArgs()
				if len(args) != 1 {
					return opts, c.ArgErr()
				}
				d, err := time.ParseDuration(args[0])
				if err != nil || d < 0 {
					return opts, c.Errf("startup_timeout must be a duration such as 5s, got %q", args[0])
				}
				opts.startupTimeout = d
			case "fallthrough":
				opts.fall.SetZonesFromArgs(c.RemainingArgs())
			default:
				return opts, c.Errf("unknown property %q", c.Val())
			}
		}
	}
	return opts, nil
}

// restConfig is the kubeconfig's when the Corefile names one, else the Pod's service account.
func restConfig(kubeconfig clientcmd.ClientConfig) (*rest.Config, error) {
	if kubeconfig != nil {
		cfg, err := kubeconfig.ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("loading kubeconfig: %w", err)
		}
		return cfg, nil
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, fmt.Errorf("no kubeconfig given and not in a cluster: %w", err)
	}
	return cfg, nil
}

var routeLogsOnce sync.Once

// routeControllerRuntimeLogs sends the informers' logs to CoreDNS's log, so they read like the
// rest of the server's and controller-runtime does not complain that it has no logger.
func routeControllerRuntimeLogs() {
	routeLogsOnce.Do(func() {
		ctrllog.SetLogger(funcr.New(func(prefix, args string) {
			log.Info(prefix + " " + args)
		}, funcr.Options{}))
	})
}
