// Package lightset runs a ClusterSet of light members for fleet-scale measurements: a broker and
// N members that are each only etcd and kube-apiserver (envtest control planes, no scheduler,
// kubelet or controller-manager), with one real fleetslice manager process per member started
// from bin/manager with its default flags. Workloads are selector-less Services with
// EndpointSlices written by the caller, so ten members fit on a small machine.
package lightset

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetslice/fleetslice/controllers/multicluster"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/broker"
)

// Options shape a light ClusterSet.
type Options struct {
	// Members is how many members to start, named member-00, member-01, ...
	Members int
	// Workdir holds kubeconfigs and manager logs.
	Workdir string
	// Manager is the manager binary.
	Manager string
	// Lease is every manager's --cluster-lease-duration; zero leaves the manager's default.
	Lease time.Duration
	// ManagerArgs are added to every manager's command line (tuned runs; the headline runs add
	// nothing, so every manager runs at its defaults).
	ManagerArgs []string
	// Pprof has every manager serve Go's pprof profiles and its metrics on loopback ports of its
	// own (see PprofAddress and MetricsAddress), for profiling a phase.
	Pprof bool
}

// Set is a running light ClusterSet.
type Set struct {
	Broker  *testenv.Cluster
	Members []*testenv.Cluster
	// IDs are the members' cluster ids, in the order of Members.
	IDs []string

	opts     Options
	mu       sync.Mutex
	managers map[string]*localset.Process
	pprof    map[string]string
	metrics  map[string]string
	// apiServers are the kube-apiservers StartAPIServer started again; stoppedAPIServers the
	// command lines of those StopAPIServer stopped, by cluster name.
	apiServers        map[string]*apiServer
	stoppedAPIServers map[string][]string
}

// MemberID names the i-th member.
func MemberID(i int) string { return fmt.Sprintf("member-%02d", i) }

// Start launches the control planes in parallel, prepares the broker as `fleetslice up` does,
// writes each member's ClusterProperty and kubeconfigs. No manager runs until StartManagers.
// Whatever fails, nothing is left running.
func Start(ctx context.Context, opts Options) (_ *Set, err error) {
	if opts.Members < 2 {
		return nil, fmt.Errorf("a ClusterSet needs at least 2 members, asked for %d", opts.Members)
	}
	s := &Set{opts: opts, managers: map[string]*localset.Process{}, pprof: map[string]string{}, metrics: map[string]string{}, apiServers: map[string]*apiServer{}, stoppedAPIServers: map[string][]string{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	for i := range opts.Members {
		s.IDs = append(s.IDs, MemberID(i))
	}
	envs, err := testenv.StartClusterSet(s.IDs)
	for _, env := range envs[:len(envs)-1] {
		s.Members = append(s.Members, env)
	}
	s.Broker = envs[len(envs)-1]
	if err != nil {
		return nil, err
	}
	kubeconfigs, err := broker.Prepare(ctx, s.Broker.Config, multicluster.DefaultNamespace, s.IDs, broker.Options{})
	if err != nil {
		return nil, fmt.Errorf("preparing the broker: %w", err)
	}
	if err := os.MkdirAll(opts.Workdir, 0o755); err != nil {
		return nil, err
	}
	for i, id := range s.IDs {
		if err := os.WriteFile(s.brokerKubeconfig(id), kubeconfigs[id], 0o600); err != nil {
			return nil, err
		}
		if err := testenv.WriteKubeconfig(s.Members[i].Config, s.memberKubeconfig(id)); err != nil {
			return nil, err
		}
		if err := clusterid.Ensure(ctx, s.Members[i].Client, id); err != nil {
			return nil, fmt.Errorf("%s: %w", id, err)
		}
	}
	return s, nil
}

func (s *Set) brokerKubeconfig(id string) string {
	return filepath.Join(s.opts.Workdir, id+"-broker.kubeconfig")
}

func (s *Set) memberKubeconfig(id string) string {
	return filepath.Join(s.opts.Workdir, id+".kubeconfig")
}

// StartManagers starts the managers of the given members (all when none is given), each a
// separate process at its default flags plus Options.ManagerArgs.
func (s *Set) StartManagers(ids ...string) error {
	if len(ids) == 0 {
		ids = s.IDs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if s.managers[id] != nil {
			return fmt.Errorf("the manager of %s already runs", id)
		}
		args := []string{
			"--kubeconfig", s.memberKubeconfig(id), "--broker-kubeconfig", s.brokerKubeconfig(id),
			"--health-probe-bind-address", "0",
		}
		if s.opts.Lease > 0 {
			args = append(args, "--cluster-lease-duration", s.opts.Lease.String())
		}
		if !s.opts.Pprof {
			args = append(args, "--metrics-bind-address", "0")
		} else {
			addr, err := localset.FreeLoopbackAddress()
			if err != nil {
				return err
			}
			metrics, err := localset.FreeLoopbackAddress()
			if err != nil {
				return err
			}
			args = append(args, "--pprof-bind-address", addr, "--metrics-bind-address", metrics)
			s.pprof[id], s.metrics[id] = addr, metrics
		}
		args = append(args, s.opts.ManagerArgs...)
		p, err := localset.StartProcess(filepath.Join(s.opts.Workdir, "logs"), "manager-"+id, s.opts.Manager, args...)
		if err != nil {
			return err
		}
		s.managers[id] = p
	}
	return nil
}

// StopManager stops one member's manager (SIGTERM, as a rolling upgrade does).
func (s *Set) StopManager(id string) error {
	s.mu.Lock()
	p := s.managers[id]
	delete(s.managers, id)
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no manager runs for %s", id)
	}
	return p.Stop(15 * time.Second)
}

// PprofAddress is where the running manager of a member serves pprof, "" without Options.Pprof.
func (s *Set) PprofAddress(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pprof[id]
}

// MetricsAddress is where the running manager of a member serves its metrics over plain HTTP,
// "" without Options.Pprof.
func (s *Set) MetricsAddress(id string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.metrics[id]
}

// ManagerPIDs are the running managers' process ids by member.
func (s *Set) ManagerPIDs() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for id, p := range s.managers {
		out[id] = p.PID()
	}
	return out
}

// ManagersRunning fails naming any manager that has exited, with the end of its log.
func (s *Set) ManagersRunning() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range s.managers {
		if exited, _ := p.Exited(); exited {
			errs = append(errs, errors.New(p.Describe(20)))
		}
	}
	return errors.Join(errs...)
}

// Stop stops every manager and control plane. It may be called more than once.
func (s *Set) Stop() error {
	s.mu.Lock()
	managers := s.managers
	s.managers = map[string]*localset.Process{}
	s.mu.Unlock()
	var errs []error
	for _, p := range managers {
		errs = append(errs, p.Stop(15*time.Second))
	}
	errs = append(errs, s.stopAPIServers())
	var wg sync.WaitGroup
	stopErrs := make([]error, len(s.Members)+1)
	for i, c := range append([]*testenv.Cluster{s.Broker}, s.Members...) {
		wg.Go(func() { stopErrs[i] = c.Stop() })
	}
	wg.Wait()
	s.Broker, s.Members = nil, nil
	return errors.Join(append(errs, stopErrs...)...)
}

// ControlPlanePIDs finds the kube-apiserver serving host (an https://127.0.0.1:<port> URL) and
// the etcd behind it among this process's children, by their command lines.
func ControlPlanePIDs(host string) (apiserver, etcd int, err error) {
	u, err := url.Parse(host)
	if err != nil {
		return 0, 0, err
	}
	children := map[int][]string{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		children[pid] = strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	}
	etcdURL := ""
	for pid, args := range children {
		if filepath.Base(args[0]) == "kube-apiserver" && slices.Contains(args, "--secure-port="+u.Port()) {
			apiserver = pid
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--etcd-servers="); ok {
					etcdURL = v
				}
			}
		}
	}
	if apiserver == 0 || etcdURL == "" {
		return 0, 0, fmt.Errorf("no kube-apiserver process serves %s", host)
	}
	for pid, args := range children {
		if filepath.Base(args[0]) == "etcd" && slices.ContainsFunc(args, func(a string) bool {
			return strings.HasPrefix(a, "--listen-client-urls=") && strings.Contains(a, etcdURL)
		}) {
			return apiserver, pid, nil
		}
	}
	return 0, 0, fmt.Errorf("no etcd process listens on %s for the kube-apiserver of %s", etcdURL, host)
}
