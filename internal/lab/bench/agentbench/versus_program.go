package agentbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/internal/lab/netns"
)

// program is one of the two dataplanes measured side by side, as the separate process a node runs.
type program struct {
	name string
	// prefix is what its sync metrics' names start with.
	prefix string
	// table is its nftables table in family ip.
	table       string
	binary      string
	metricsAddr string
	args        func(kubeconfig string) []string
}

// benchNode is the Node both programs program, created by the bench; localEndpointNode holds
// the endpoints of externalTrafficPolicy: Local Services that are on it.
const (
	benchNode        = "bench-node"
	benchNodeIP      = "10.255.0.1"
	otherNode        = "bench-other-node"
	agentMetrics     = "127.0.0.1:10290"
	kubeProxyMetrics = "127.0.0.1:10249"
)

// agentProgram runs cmd/agent at its defaults but for what the bench needs to say: the node, IPv4
// only (as kube-proxy is made single-stack, see startIn) and the pod network, as kube-proxy's
// --cluster-cidr.
func agentProgram(binary string) program {
	return program{name: "agent", prefix: "fleetslice_agent_", table: dataplane.TableName, binary: binary,
		metricsAddr: agentMetrics, args: func(kubeconfig string) []string {
			return []string{"--kubeconfig", kubeconfig, "--node-name", benchNode, "--ip-families", "IPv4",
				"--pod-cidr", podCIDR.String(), "--metrics-bind-address", agentMetrics,
				"--health-probe-bind-address", "127.0.0.1:10291"}
		}}
}

// kubeProxyProgram runs kube-proxy in nftables mode at its defaults but for the same choices.
// --conntrack-max-per-core=0 leaves the host-wide nf_conntrack_max alone: it is not the
// namespace's to change.
func kubeProxyProgram(binary string) program {
	return program{name: "kube-proxy", prefix: "kubeproxy_", table: "kube-proxy", binary: binary,
		metricsAddr: kubeProxyMetrics, args: func(kubeconfig string) []string {
			return []string{"--kubeconfig", kubeconfig, "--proxy-mode", "nftables", "--hostname-override", benchNode,
				"--cluster-cidr", podCIDR.String(), "--metrics-bind-address", kubeProxyMetrics,
				"--healthz-bind-address", "127.0.0.1:10256", "--conntrack-max-per-core", "0"}
		}}
}

// running is a program started inside its own network namespace.
type running struct {
	program
	ns      *netns.Namespace
	cmd     *exec.Cmd
	logPath string
	exited  chan error
	started time.Time
	client  *http.Client
}

// startIn creates a namespace, mirrors the API server into it and starts p there. IPv6 is
// disabled in the namespace: kube-proxy then runs single-stack, as the agent does with
// --ip-families=IPv4, so both program one table.
func startIn(p program, apiHostPort, kubeconfig, logDir string) (r *running, err error) {
	ns, err := netns.Create("fsvs")
	if err != nil {
		return nil, err
	}
	r = &running{program: p, ns: ns, exited: make(chan error, 1)}
	defer func() {
		if err != nil {
			err = errors.Join(err, r.stop())
			r = nil
		}
	}()
	if _, err := ns.Command("", "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"); err != nil {
		return r, err
	}
	ln, err := ns.Mirror(apiHostPort)
	if err != nil {
		return r, err
	}
	r.logPath = filepath.Join(logDir, p.name+".log")
	logFile, err := os.Create(r.logPath)
	if err != nil {
		return r, errors.Join(err, ln.Close())
	}
	r.cmd = exec.Command(p.binary, p.args(kubeconfig)...)
	r.cmd.Stdout, r.cmd.Stderr = logFile, logFile
	// The child inherits the network namespace of the thread that forks it.
	ns.Do(func() { r.started = time.Now(); err = r.cmd.Start() })
	if err != nil {
		return r, errors.Join(err, ln.Close(), logFile.Close())
	}
	go func() {
		r.exited <- r.cmd.Wait()
		_ = logFile.Close()
		_ = ln.Close()
	}()
	r.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			var err error
			ns.Do(func() { c, err = net.DialTimeout(network, addr, 5*time.Second) })
			return c, err
		},
	}}
	return r, nil
}

// stop ends the program by its process id (SIGTERM, then SIGKILL after 15 s) and deletes the
// namespace.
func (r *running) stop() error {
	var errs []error
	if r.cmd != nil && r.cmd.Process != nil {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-r.exited:
		case <-time.After(15 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
	}
	if r.client != nil {
		r.client.CloseIdleConnections()
	}
	if err := r.ns.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// logTail is the end of the program's log, for errors.
func (r *running) logTail() string {
	b, err := os.ReadFile(r.logPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// scrape reads the program's metrics, from inside its namespace.
func (r *running) scrape(ctx context.Context) (scrape, error) {
	select {
	case err := <-r.exited:
		r.exited <- err
		return nil, fmt.Errorf("%s exited (%v); its log ends:\n%s", r.name, err, r.logTail())
	default:
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.metricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s metrics: %s", r.name, resp.Status)
	}
	return parseMetrics(string(body))
}

// lastSync is when the last successful sync ended, zero before the first.
func (r *running) lastSync(s scrape) time.Time {
	v := s.latest(r.prefix + metricLastSync)
	if v <= 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(v*1e9))
}

// listTable is `nft list table ip <table>` inside the namespace.
func (r *running) listTable() (string, error) {
	return r.ns.Command("", "nft", "list", "table", "ip", r.table)
}

// tableSize is the listing's line count and what the JSON listing holds.
func (r *running) tableSize() (lines int, counts tableCounts, err error) {
	text, err := r.listTable()
	if err != nil {
		return 0, counts, err
	}
	js, err := r.ns.Command("", "nft", "--json", "list", "table", "ip", r.table)
	if err != nil {
		return 0, counts, err
	}
	m, err := parseListing([]byte(js))
	if err != nil {
		return 0, counts, err
	}
	return strings.Count(text, "\n"), m.counts(), nil
}

// peakRSS is the program's peak resident memory (VmHWM) in bytes, 0 when unreadable.
func (r *running) peakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// holdsAll reports whether the listing names every address, as a whole address (10.0.0.1 is not
// found in 10.0.0.10). The listing's addresses are read once, so checking the hundred addresses of
// a 1% change against a 10,000-Service table stays cheap.
func holdsAll(listing string, addrs []string) bool {
	present := map[string]bool{}
	for _, a := range ipv4Literal.FindAllString(listing, -1) {
		present[a] = true
	}
	for _, a := range addrs {
		if !present[a] {
			return false
		}
	}
	return true
}
