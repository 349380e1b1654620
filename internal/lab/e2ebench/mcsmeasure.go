package e2ebench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
)

// MCSMeasurement sizes one whole multi-cluster measurement on a fresh local ClusterSet.
type MCSMeasurement struct {
	MCSOptions
	Clusters, Nodes int
	// Lease is the members' --cluster-lease-duration.
	Lease time.Duration
	// BinDir holds the manager binary; Workdir is the ClusterSet's state directory.
	BinDir, Workdir string
}

// MCSResult is what MeasureMCS saw.
type MCSResult struct {
	Propagation *Propagation
	// Lost is the member whose manager was stopped; Withdrawals are the others' views of it.
	Lost        string
	Withdrawals []Withdrawal
	Wall        time.Duration
}

// MeasureMCS brings up a ClusterSet with one fleetslice manager per member, times propagation
// (StartMCS, Propagate), stops the last member's manager and times the withdrawal of its
// endpoints (LoseCluster), and tears everything down again, also on failure.
func MeasureMCS(ctx context.Context, m MCSMeasurement) (res *MCSResult, err error) {
	began := time.Now()
	cs, err := localset.Up(ctx, localset.Options{
		Workdir: m.Workdir, Clusters: m.Clusters, NodesPerCluster: m.Nodes, Log: m.Log,
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		err = errors.Join(err, localset.Down(context.WithoutCancel(ctx), cs.Workdir, m.Log))
	}()
	managers := map[string]*localset.Process{}
	defer func() {
		for _, member := range slices.Sorted(maps.Keys(managers)) {
			if err != nil {
				err = fmt.Errorf("%w\n%s", err, managers[member].Describe(20))
			}
		}
		for _, p := range managers {
			err = errors.Join(err, p.Stop(10*time.Second))
		}
	}()
	for _, member := range cs.Members {
		p, err := cs.StartProcess("manager-"+member, filepath.Join(m.BinDir, "manager"),
			"--kubeconfig", cs.Kubeconfig, "--context", localset.Context(member),
			"--broker-kubeconfig", cs.BrokerKubeconfig(member), "--cluster-lease-duration", m.Lease.String(),
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
		if err != nil {
			return nil, err
		}
		managers[member] = p
	}
	run, err := StartMCS(ctx, cs, m.MCSOptions)
	if err != nil {
		return nil, err
	}
	defer run.Close()
	res = &MCSResult{Lost: cs.Members[len(cs.Members)-1]}
	if res.Propagation, err = run.Propagate(ctx); err != nil {
		return nil, err
	}
	res.Withdrawals, err = run.LoseCluster(ctx, res.Lost, func() error {
		// Stopped here once only: Process.Stop must not be called twice.
		p := managers[res.Lost]
		delete(managers, res.Lost)
		return p.Stop(10 * time.Second)
	})
	if err != nil {
		return nil, fmt.Errorf("losing %s: %w", res.Lost, err)
	}
	res.Wall = time.Since(began)
	return res, nil
}
