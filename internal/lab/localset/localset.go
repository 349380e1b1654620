// Package localset runs a ClusterSet of simulated Kubernetes clusters on one machine: kwokctl's
// binary runtime starts real control planes (etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler) while kwok plays the kubelets, so Deployments get scheduled and Pods run with IPs
// without containers. A broker (etcd and kube-apiserver only) is started beside the members for
// multi-cluster services.
package localset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
	"github.com/fleetslice/fleetslice/internal/lab/podnet"
)

// BrokerName is the kwok cluster name of the broker control plane.
const BrokerName = "broker"

// serviceCIDR is every member's Service IP range; Pod CIDRs are /23s of 10.<member>.0.0/16 (podCIDR).
const serviceCIDR = "10.96.0.0/16"

// stateFile records what `Up` created so `Down` and `Status` work from any later process.
const stateFile = "clusterset.json"

// Options describe the ClusterSet to bring up.
type Options struct {
	// Workdir holds the clusters' state, PKI, logs and the kubeconfig. Created if missing.
	Workdir string
	// Clusters is the number of member clusters (named cluster-1 ... cluster-N).
	Clusters int
	// NodesPerCluster is spread round-robin over Zones.
	NodesPerCluster int
	// CPUScale multiplies the CPU (and memory) of every Node of the named members, so that
	// members of unequal size show what decisions by Node CPU across clusters do (a member
	// not named, or with a factor below 1, keeps the zones' own sizes).
	CPUScale map[string]int
	// Zones the Nodes are spread over; DefaultZones when empty.
	Zones []Zone
	// UpstreamEndpointSlices lists members that keep kube-controller-manager's own EndpointSlice
	// controller, for side-by-side comparisons. Every other member runs without it.
	UpstreamEndpointSlices []string
	// DisableQPSLimits lifts the client-side rate limits of the control-plane components, so
	// kube-controller-manager's controllers react as fast as fleetslice's (which has none) in
	// side-by-side comparisons.
	DisableQPSLimits bool
	// ControllerManagerArgs are extra kube-controller-manager flags (name without dashes: value)
	// for every member.
	ControllerManagerArgs map[string]string
	// AuditEndpointSliceWrites has every member's API server write an audit log of EndpointSlice
	// writes (ClusterSet.AuditLog), which tells apart writers that share an API server.
	AuditEndpointSliceWrites bool
	// NoBroker skips preparing the broker for multi-cluster services (it still runs).
	NoBroker bool
	// PodNetwork prepares every member for StartPodNetwork: kwok tells the API server that each
	// Node's kubelet endpoint is the pod runtime's server (KubeletAddress), which runs
	// `kubectl exec` and `kubectl logs` inside the Pods' network namespaces. Needs root.
	PodNetwork bool
	// DNS plans a fleetslice-dns per member (StartDNS runs it) and has each member's kwok run
	// `kubectl exec` commands on the host with that DNS as their resolver where it can (dns.go).
	DNS bool
	// Log receives progress lines; nil discards them.
	Log io.Writer
}

// ClusterSet is what Up created.
type ClusterSet struct {
	Workdir    string   `json:"workdir"`
	Kubeconfig string   `json:"kubeconfig"`
	Members    []string `json:"members"`
	Broker     string   `json:"broker"`
	Zones      []Zone   `json:"zones"`
	// DNS is each member's DNS when Up planned them (Options.DNS).
	DNS map[string]MemberDNS `json:"dns,omitempty"`
	// PodNetwork is the prefix of the network namespaces StartPodNetwork created, while they
	// exist: Down removes them, and the processes inside, after a crash too.
	PodNetwork string `json:"podNetwork,omitempty"`
	// Kubelets is, per member prepared for a pod network, where the runtime's kubelet server
	// listens and where kwok's own server answers what it does not serve.
	Kubelets map[string]Kubelet `json:"kubelets,omitempty"`
}

// Kubelet is a member's kubelet endpoint when it runs a pod network.
type Kubelet struct {
	// Address is the pod runtime's server, host:port on the host's loopback.
	Address string `json:"address"`
	// Kwok is kwok's own server.
	Kwok string `json:"kwok"`
}

// Context returns the kubeconfig context name of a cluster.
func Context(cluster string) string { return "kwok-" + cluster }

// MemberName is the name of the i-th member cluster (1-based).
func MemberName(i int) string { return fmt.Sprintf("cluster-%d", i) }

// Up creates the broker and every member, their Nodes and the CRDs fleetslice uses. On failure it
// tears down whatever it had started, so a failed Up never leaves processes behind.
//
// A control-plane component that exited during the start gets the whole ClusterSet started once
// more: kube-controller-manager gives its API server a fixed 10 s to report healthy, and on a
// loaded machine the API server's RBAC bootstrap can take longer, which makes it exit at start
// through no fault of the ClusterSet.
func Up(ctx context.Context, opts Options) (*ClusterSet, error) {
	cs, err := up(ctx, opts)
	if errors.Is(err, errComponentExited) && ctx.Err() == nil {
		if opts.Log != nil {
			fmt.Fprintf(opts.Log, "a component exited during the start, starting the ClusterSet again: %v\n", err)
		}
		cs, err = up(ctx, opts)
	}
	return cs, err
}

func up(ctx context.Context, opts Options) (cs *ClusterSet, err error) {
	if opts.Clusters < 1 {
		return nil, fmt.Errorf("need at least one member cluster, got %d", opts.Clusters)
	}
	if opts.NodesPerCluster < 1 {
		return nil, fmt.Errorf("need at least one node per cluster, got %d", opts.NodesPerCluster)
	}
	if len(opts.Zones) == 0 {
		opts.Zones = DefaultZones()
	}
	workdir, err := filepath.Abs(opts.Workdir)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(workdir, stateFile)); err == nil {
		return nil, fmt.Errorf("a ClusterSet already runs from %s: run `fleetslice down` first", workdir)
	}
	if err := os.MkdirAll(workdir, 0o755); err != nil {
		return nil, err
	}
	bin, err := k8sbin.Dir()
	if err != nil {
		return nil, err
	}
	cs = &ClusterSet{Workdir: workdir, Kubeconfig: filepath.Join(workdir, "kubeconfig"), Broker: BrokerName, Zones: opts.Zones}
	for i := 1; i <= opts.Clusters; i++ {
		cs.Members = append(cs.Members, MemberName(i))
	}
	// Record the state before starting anything, so a Down after a crash finds every cluster.
	if err := cs.save(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, Down(context.WithoutCancel(ctx), workdir, opts.Log))
			cs = nil
		}
	}()

	k := kwokctl{bin: bin, workdir: workdir, kubeconfig: cs.Kubeconfig, log: opts.Log}
	if _, err := k.create(ctx, BrokerName, member{kwok: filepath.Join(bin, k8sbin.Kwok)}, "--disable", "kube-controller-manager,kube-scheduler,kwok-controller"); err != nil {
		return cs, err
	}
	for _, name := range cs.Members {
		m := member{kwok: filepath.Join(bin, k8sbin.Kwok)}
		if opts.DNS {
			d, kwok, err := cs.planDNS(name, m.kwok)
			if err != nil {
				return cs, fmt.Errorf("planning %s's DNS: %w", name, err)
			}
			if cs.DNS == nil {
				cs.DNS = map[string]MemberDNS{}
			}
			cs.DNS[name] = d
			m = member{kwok: kwok, config: hostExec}
			if err := cs.save(); err != nil {
				return cs, err
			}
		}
		// kube-apiserver's default Service range is a /24: about 250 ClusterIPs, too few for
		// hundreds of exported Services (each ClusterSetIP import takes one more).
		args := []string{"--extra-args", "kube-apiserver=service-cluster-ip-range=" + serviceCIDR,
			// One instance of each: with leader election on, a slow etcd on a loaded machine makes
			// them lose their lease and exit, and nothing restarts them.
			"--extra-args", "kube-controller-manager=leader-elect=false",
			"--extra-args", "kube-scheduler=leader-elect=false"}
		if opts.DisableQPSLimits {
			args = append(args, "--disable-qps-limits")
		}
		for _, k := range slices.Sorted(maps.Keys(opts.ControllerManagerArgs)) {
			args = append(args, "--extra-args", "kube-controller-manager="+k+"="+opts.ControllerManagerArgs[k])
		}
		if opts.AuditEndpointSliceWrites {
			policy, err := writeAuditPolicy(workdir)
			if err != nil {
				return cs, err
			}
			args = append(args, "--extra-args", "kube-apiserver=audit-policy-file="+policy,
				"--extra-args", "kube-apiserver=audit-log-path="+cs.AuditLog(name))
		}
		if opts.PodNetwork {
			ports, err := defaultPortRegistry().reserve(1)
			if err != nil {
				return cs, err
			}
			if cs.Kubelets == nil {
				cs.Kubelets = map[string]Kubelet{}
			}
			addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0])))
			cs.Kubelets[name] = Kubelet{Address: addr}
			// Appended after kwokctl's own flags, so these win: every Node names the runtime's
			// server as its kubelet.
			args = append(args, "--extra-args", "kwok-controller=node-ip=127.0.0.1",
				"--extra-args", "kwok-controller=node-port="+strconv.Itoa(int(ports[0])))
		}
		if !slices.Contains(opts.UpstreamEndpointSlices, name) {
			// fleetslice's controller replaces kube-controller-manager's in these clusters.
			args = append(args, "--extra-args", "kube-controller-manager=controllers=*,-endpointslice-controller")
		}
		kwokPort, err := k.create(ctx, name, m, args...)
		if err != nil {
			return cs, err
		}
		if kl, ok := cs.Kubelets[name]; ok {
			kl.Kwok = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(int(kwokPort)))
			cs.Kubelets[name] = kl
			if err := cs.save(); err != nil {
				return cs, err
			}
		}
	}
	for _, name := range cs.Members {
		if err := prepareMember(ctx, cs, name, opts); err != nil {
			return cs, fmt.Errorf("preparing %s: %w", name, err)
		}
	}
	if !opts.NoBroker {
		if err := prepareBroker(ctx, cs); err != nil {
			return cs, fmt.Errorf("preparing broker: %w", err)
		}
	}
	// kwokctl reports a cluster up once its API server answers; a controller that exited at start
	// (a port taken, a bad flag) would otherwise show only as Pods that never run.
	return cs, cs.componentsRunning()
}

// Down deletes every cluster recorded in workdir. kwokctl stops each component by the process id
// it recorded at start; Down then checks that none of them is still alive.
func Down(ctx context.Context, workdir string, log io.Writer) error {
	cs, err := Load(workdir)
	if err != nil {
		return err
	}
	bin, err := k8sbin.Dir()
	if err != nil {
		return err
	}
	k := kwokctl{bin: bin, workdir: cs.Workdir, kubeconfig: cs.Kubeconfig, log: log}
	var errs []error
	if cs.PodNetwork != "" {
		if err := podnet.Cleanup(cs.PodNetwork); err != nil {
			errs = append(errs, fmt.Errorf("removing pod network %s: %w", cs.PodNetwork, err))
		}
	}
	for _, name := range append(append([]string{}, cs.Members...), cs.Broker) {
		if err := k.delete(ctx, name); err != nil {
			errs = append(errs, err)
		}
	}
	if left := waitForExit(ctx, cs.Workdir, 30*time.Second); len(left) > 0 {
		errs = append(errs, fmt.Errorf("processes still running from %s after down: %v", cs.Workdir, left))
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(filepath.Join(cs.Workdir, stateFile)), os.Remove(cs.Kubeconfig))
		errs[len(errs)-1] = ignoreNotExist(errs[len(errs)-1])
	}
	return errors.Join(errs...)
}

// waitForExit waits for the components kwokctl signalled to exit: it returns as soon as they
// are stopping, not stopped. Stragglers after the grace period are killed by process id.
func waitForExit(ctx context.Context, workdir string, grace time.Duration) []string {
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if len(ProcessesUnder(workdir)) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ProcessesUnder(workdir)
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, pid := range processIDsUnder(workdir) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	time.Sleep(500 * time.Millisecond)
	return ProcessesUnder(workdir)
}

// Load reads the ClusterSet a previous Up recorded in workdir.
func Load(workdir string) (*ClusterSet, error) {
	abs, err := filepath.Abs(workdir)
	if err != nil {
		return nil, err
	}
	raw, err := os.ReadFile(filepath.Join(abs, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no ClusterSet in %s (run `fleetslice up` first)", abs)
	}
	if err != nil {
		return nil, err
	}
	cs := &ClusterSet{}
	if err := json.Unmarshal(raw, cs); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(abs, stateFile), err)
	}
	return cs, nil
}

func (cs *ClusterSet) save() error {
	raw, err := json.MarshalIndent(cs, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cs.Workdir, stateFile), raw, 0o644)
}

// kwokctl runs the kwokctl binary against one workdir, always with the locally built binaries so
// that nothing is ever downloaded.
type kwokctl struct {
	bin, workdir, kubeconfig string
	log                      io.Writer
}

// kwokWorkdir is where kwokctl keeps the state of a ClusterSet's clusters.
func kwokWorkdir(workdir string) string { return filepath.Join(workdir, "kwok") }

// kwokClusterDir holds one cluster's kwokctl state: its config, pids/ and logs/.
func kwokClusterDir(workdir, cluster string) string {
	return filepath.Join(kwokWorkdir(workdir), "clusters", cluster)
}

func (k kwokctl) env() []string {
	return append(os.Environ(),
		"KWOK_WORKDIR="+kwokWorkdir(k.workdir),
		"KWOK_RUNTIME=binary",
		"KWOK_KUBE_VERSION="+k8sbin.KubernetesVersion,
		"KWOK_KUBECTL_BINARY="+filepath.Join(k.bin, k8sbin.Kubectl),
	)
}

// member is what differs between the clusters kwokctl creates: the kwok controller binary and
// more kwok configuration documents (YAML, each starting with ---).
type member struct {
	kwok, config string
}

// create runs `kwokctl create cluster` and returns the port of the cluster's kwok server.
func (k kwokctl) create(ctx context.Context, name string, m member, extra ...string) (uint32, error) {
	start := time.Now()
	config, kwokPort, err := k.writePorts(name, m.config)
	if err != nil {
		return 0, fmt.Errorf("creating cluster %s: %w", name, err)
	}
	args := []string{"create", "cluster", "--name", name, "--runtime", "binary", "--config", config,
		"--kubeconfig", k.kubeconfig, "--wait", "2m", "--quiet-pull",
		"--etcd-binary", filepath.Join(k.bin, k8sbin.Etcd),
		"--kube-apiserver-binary", filepath.Join(k.bin, k8sbin.KubeAPIServer),
		"--kube-controller-manager-binary", filepath.Join(k.bin, k8sbin.KubeControllerManager),
		"--kube-scheduler-binary", filepath.Join(k.bin, k8sbin.KubeScheduler),
	}
	if m.kwok != "" {
		args = append(args, "--kwok-controller-binary", m.kwok)
	}
	if err := k.run(ctx, append(args, extra...)...); err != nil {
		return 0, fmt.Errorf("creating cluster %s: %w", name, err)
	}
	k.logf("cluster %s up in %s", name, time.Since(start).Round(100*time.Millisecond))
	return kwokPort, nil
}

// writePorts reserves a port for each component kwokctl would otherwise choose one for (see
// portRegistry) and writes them as a kwokctl configuration for the cluster. It returns the
// configuration's path and kwok's port.
func (k kwokctl) writePorts(name, more string) (string, uint32, error) {
	fields := []string{"etcdPeerPort", "etcdPort", "kubeApiserverPort", "kwokControllerPort",
		"kubeControllerManagerPort", "kubeSchedulerPort"}
	ports, err := defaultPortRegistry().reserve(len(fields))
	if err != nil {
		return "", 0, err
	}
	var config strings.Builder
	config.WriteString("apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokctlConfiguration\noptions:\n")
	for i, field := range fields {
		fmt.Fprintf(&config, "  %s: %d\n", field, ports[i])
	}
	config.WriteString(more)
	path := filepath.Join(k.workdir, "ports-"+name+".yaml")
	return path, ports[slices.Index(fields, "kwokControllerPort")], os.WriteFile(path, []byte(config.String()), 0o644)
}

func (k kwokctl) delete(ctx context.Context, name string) error {
	if _, err := os.Stat(kwokClusterDir(k.workdir, name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := k.run(ctx, "delete", "cluster", "--name", name, "--kubeconfig", k.kubeconfig); err != nil {
		return fmt.Errorf("deleting cluster %s: %w", name, err)
	}
	k.logf("cluster %s down", name)
	return nil
}

func (k kwokctl) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(k.bin, k8sbin.Kwokctl), args...)
	cmd.Env = k.env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:2], " "), err, tail(out, 20))
	}
	return nil
}

func (k kwokctl) logf(format string, args ...any) {
	if k.log != nil {
		fmt.Fprintf(k.log, format+"\n", args...)
	}
}

func tail(out []byte, lines int) string {
	all := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

func ignoreNotExist(err error) error {
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Remove is what a test suite does last: Down, a check that no process of the ClusterSet is left,
// and the removal of its workdir.
func Remove(ctx context.Context, workdir string, log io.Writer) error {
	if err := Down(ctx, workdir, log); err != nil {
		return err
	}
	if left := ProcessesUnder(workdir); len(left) > 0 {
		return fmt.Errorf("down left processes behind: %v", left)
	}
	return os.RemoveAll(workdir)
}
