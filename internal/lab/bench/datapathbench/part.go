// Package datapathbench is the `datapath` part of `fleetslice bench`: on a local ClusterSet with a
// real pod network (network namespaces, the node agent's nftables), how soon after an exported
// Pod turns ready a client in the other cluster reaches it through the ClusterSet IP, and how soon
// after it turns not ready new connections stop reaching it, beside a client in the Pod's own
// cluster going through the Service's ClusterIP, while the ClusterSet holds 100 or 1,000 exported
// Services.
package datapathbench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/pflag"

	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// Sizes are the exported Services measured, QuickSizes those of --quick.
var (
	Sizes      = []int{100, 1_000}
	QuickSizes = []int{10}
)

// MaxServices bounds --datapath-services: every exported Service takes a ClusterIP in the
// exporter and a ClusterSet IP in the importer.
const MaxServices = 5_000

type settings struct {
	services []int
	samples  int
	nodes    int
	timeout  time.Duration
}

func (o *settings) resolve(env bench.Env) (setup, error) {
	s := setup{services: Sizes, samples: 20, nodes: o.nodes, pause: 20 * time.Millisecond, quiet: time.Second,
		timeout: env.PhaseTimeout(o.timeout), binDir: env.BinDir, log: env.Log}
	if env.Quick {
		s.services, s.samples = QuickSizes, 3
	}
	if len(o.services) > 0 {
		s.services = o.services
	}
	if o.samples > 0 {
		s.samples = o.samples
	}
	s.answerTimeout = min(s.timeout, time.Minute)
	prev := 0
	for _, n := range s.services {
		if n < prev || n > MaxServices {
			return s, fmt.Errorf("datapath services %v must ascend within 0..%d", s.services, MaxServices)
		}
		prev = n
	}
	if s.samples > 200 {
		return s, fmt.Errorf("datapath samples %d: at most 200", s.samples)
	}
	if s.nodes < 1 || s.nodes > 8 {
		return s, fmt.Errorf("datapath nodes %d must be within 1..8", s.nodes)
	}
	return s, nil
}

// Missing lists what the part needs and this machine lacks: the pod network's needs and socat,
// which the sampled Pods answer with.
func Missing() []string {
	missing := localset.PodNetworkMissing()
	if _, err := exec.LookPath("socat"); err != nil {
		missing = append(missing, "the socat binary in PATH (the sampled Pods answer with it)")
	}
	return missing
}

// Part is the `datapath` benchmark.
func Part() bench.Part {
	o := &settings{nodes: 2}
	return bench.Part{
		Name:  "datapath",
		Title: "Across clusters, end to end: from a Pod's readiness to packets",
		Flags: func(fs *pflag.FlagSet) {
			fs.IntSliceVar(&o.services, "datapath-services", nil, fmt.Sprintf("datapath part: exported Services the ClusterSet holds while sampling, ascending (default %v, %v with --quick)", Sizes, QuickSizes))
			fs.IntVar(&o.samples, "datapath-samples", 0, "datapath part: Pods made ready and then not ready, per size (default 20, 3 with --quick)")
			fs.IntVar(&o.nodes, "datapath-nodes", o.nodes, "datapath part: Nodes per member, each a network namespace with its own agent")
			fs.DurationVar(&o.timeout, "datapath-timeout", 0, "datapath part: how long each phase may take "+bench.PhaseTimeoutHelp)
		},
		Run: o.run,
	}
}

func (o *settings) run(ctx context.Context, env bench.Env) (*bench.Report, error) {
	s, err := o.resolve(env)
	if err != nil {
		return nil, err
	}
	if missing := Missing(); len(missing) > 0 {
		return nil, fmt.Errorf("the datapath part needs %v", missing)
	}
	for _, name := range []string{"manager", "agent"} {
		if _, err := env.Binary(name); err != nil {
			return nil, err
		}
	}
	if s.workdir, err = os.MkdirTemp("", "fleetslice-bench-datapath-set-"); err != nil {
		return nil, err
	}
	defer os.RemoveAll(s.workdir)
	figs, err := measure(ctx, s)
	if err != nil {
		return nil, err
	}
	return report(s, figs), nil
}
