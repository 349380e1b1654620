package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// Addresses the agent process serves inside its node namespace.
const (
	procMetricsAddr = "127.0.0.1:10290"
	procProbeAddr   = "127.0.0.1:10291"
)

var (
	agentBinaryOnce sync.Once
	agentBinaryPath string
	agentBinaryErr  error
)

// agentBinary builds cmd/agent once per suite run.
func agentBinary() string {
	GinkgoHelper()
	agentBinaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "fleetslice-agent-bin-")
		if err != nil {
			agentBinaryErr = err
			return
		}
		DeferCleanup(func() { os.RemoveAll(dir) })
		agentBinaryPath = filepath.Join(dir, "agent")
		out, err := exec.Command("go", "build", "-o", agentBinaryPath, "github.com/fleetslice/fleetslice/cmd/agent").CombinedOutput()
		if err != nil {
			agentBinaryErr = fmt.Errorf("go build cmd/agent: %v: %s", err, out)
		}
	})
	Expect(agentBinaryErr).NotTo(HaveOccurred())
	return agentBinaryPath
}

// nodeNetns is a network namespace standing for a node: the envtest API server is mirrored
// into it at its own address, so an agent process started inside uses a plain kubeconfig.
type nodeNetns struct {
	ns         *netns.Namespace
	kubeconfig string
	http       *http.Client
}

func newNodeNetns() *nodeNetns {
	GinkgoHelper()
	missing := netns.Missing()
	if _, err := exec.LookPath("nft"); err != nil {
		missing = append(missing, "the nft binary (Debian package nftables) in PATH")
	}
	if len(missing) > 0 {
		msg := "the agent process test needs " + strings.Join(missing, " and ")
		if os.Getenv(testutil.RequireKernelEnv) == "1" {
			Fail(msg + " (" + testutil.RequireKernelEnv + "=1 forbids skipping)")
		}
		Skip(msg)
	}
	ns, err := netns.Create("fsagent")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(ns.Close()).To(Succeed()) })
	api, err := url.Parse(cluster.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	mirrorAPIServer(ns, api.Host)
	n := &nodeNetns{ns: ns, kubeconfig: filepath.Join(GinkgoT().TempDir(), "kubeconfig")}
	Expect(testenv.WriteKubeconfig(cluster.Config, n.kubeconfig)).To(Succeed())
	// HTTP to the agent's metrics and probes, dialled from inside the namespace.
	n.http = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(_ context.Context, network, addr string) (c net.Conn, err error) {
			ns.Do(func() { c, err = net.DialTimeout(network, addr, 5*time.Second) })
			return c, err
		},
	}}
	return n
}

// mirrorAPIServer makes the API server's host:port reachable at the same address inside ns
// until the spec ends, as netns.Mirror does, but closes every forwarded connection at the end:
// a killed agent's watches would otherwise stay half-open at the API server, which then waits
// for them when the suite stops it.
func mirrorAPIServer(ns *netns.Namespace, addr string) {
	GinkgoHelper()
	var ln net.Listener
	var err error
	ns.Do(func() { ln, err = net.Listen("tcp", addr) })
	Expect(err).NotTo(HaveOccurred())
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) {
		mu.Lock()
		defer mu.Unlock()
		conns = append(conns, c)
	}
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			track(in)
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", addr) // on the host's network: not a namespace thread
				if err != nil {
					return
				}
				track(out)
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done // either side gone: the agent was killed, or the API server stopped
			}()
		}
	}()
	DeferCleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
}

// agentProcess is one run of the agent binary in a node namespace.
type agentProcess struct {
	cmd     *exec.Cmd
	started time.Time
	mu      sync.Mutex
	log     strings.Builder
	exited  chan struct{}
}

func (p *agentProcess) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.Write(b)
}

func (p *agentProcess) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// start runs the agent for node; it is SIGKILLed when the spec ends if still running.
func (n *nodeNetns) start(node string, extra ...string) *agentProcess {
	GinkgoHelper()
	args := append([]string{"--kubeconfig=" + n.kubeconfig, "--node-name=" + node, "--ip-families=IPv4",
		"--metrics-bind-address=" + procMetricsAddr, "--health-probe-bind-address=" + procProbeAddr,
		"--min-sync-interval=100ms"}, extra...)
	p := &agentProcess{exited: make(chan struct{})}
	var err error
	bin := agentBinary()
	n.ns.Do(func() {
		p.cmd = exec.Command(bin, args...)
		p.cmd.Stdout, p.cmd.Stderr = p, p
		err = p.cmd.Start()
	})
	Expect(err).NotTo(HaveOccurred())
	p.started = time.Now()
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	DeferCleanup(func() {
		if p.kill() {
			AddReportEntry("agent log (killed at the end of the spec)", p.logs())
		}
	})
	return p
}

// kill sends SIGKILL and waits for the process to end; false if it had already ended.
func (p *agentProcess) kill() bool {
	select {
	case <-p.exited:
		return false
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	return true
}

func (p *agentProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// ready reports whether the agent's /readyz answers 200: its last sync programmed the table.
func (n *nodeNetns) ready() bool {
	resp, err := n.http.Get("http://" + procProbeAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// errNoMetric: the agent exports no sample of the metric (yet): a vector without series.
var errNoMetric = errors.New("no metric")

// metric sums the agent process's samples of name whose labels include want.
func (n *nodeNetns) metric(name string, want map[string]string) (float64, error) {
	resp, err := n.http.Get("http://" + procMetricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(bufio.NewReader(resp.Body))
	if err != nil {
		return 0, err
	}
	sum := 0.0
	fam := families[name]
	if fam == nil {
		return 0, fmt.Errorf("%w %s", errNoMetric, name)
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum, nil
}

// table lists the agent's table as nft prints it; "" when there is none.
func (n *nodeNetns) table() string {
	GinkgoHelper()
	out, err := n.ns.Command("", "nft", "list", "table", "ip", "fleetslice")
	if err != nil && strings.Contains(err.Error(), "No such file or directory") {
		return ""
	}
	Expect(err).NotTo(HaveOccurred())
	return out
}

// canonicalTable lists the table in a form that does not depend on how it was written:
// `nft -j` objects without kernel handles, chains and sets by name, elements sorted, and
// without regular chains that hold no rule (an incremental sync leaves chains it no longer
// uses flushed for a while before it deletes them; they match no packet and nothing jumps to
// them, and a full rebuild does not write them). "" when there is no table.
func (n *nodeNetns) canonicalTable() string {
	GinkgoHelper()
	out, err := n.ns.Command("", "nft", "-j", "list", "table", "ip", "fleetslice")
	if err != nil && strings.Contains(err.Error(), "No such file or directory") {
		return ""
	}
	Expect(err).NotTo(HaveOccurred())
	return canonicalNftJSON(out)
}

func canonicalNftJSON(listing string) string {
	GinkgoHelper()
	var doc struct {
		Nftables []map[string]map[string]any `json:"nftables"`
	}
	Expect(json.Unmarshal([]byte(listing), &doc)).To(Succeed())
	chains := map[string]string{}
	rules := map[string][]string{}
	var others []string
	for _, obj := range doc.Nftables {
		for kind, body := range obj {
			delete(body, "handle")
			switch kind {
			case "metainfo":
			case "chain":
				b, _ := json.Marshal(body)
				chains[fmt.Sprint(body["name"])] = string(b)
			case "rule":
				b, _ := json.Marshal(body["expr"])
				chain := fmt.Sprint(body["chain"])
				rules[chain] = append(rules[chain], string(b))
			default:
				if elems, ok := body["elem"].([]any); ok {
					lines := make([]string, len(elems))
					for i, e := range elems {
						b, _ := json.Marshal(e)
						lines[i] = string(b)
					}
					sort.Strings(lines)
					body["elem"] = lines
				}
				b, _ := json.Marshal(body)
				others = append(others, kind+" "+string(b))
			}
		}
	}
	var lines []string
	for name, def := range chains {
		if len(rules[name]) == 0 && !strings.Contains(def, `"hook"`) {
			continue
		}
		lines = append(lines, "chain "+def+"\n  "+strings.Join(rules[name], "\n  "))
	}
	lines = append(lines, others...)
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// dnatTarget is an endpoint as the table spells it: "to 10.150.0.1:8080" in a single
// endpoint's rule, "10.150.0.1 . 8080" in an endpoint map.
var dnatTarget = regexp.MustCompile(`(10\.150\.[0-9]+\.[0-9]+)(?::| \. )([0-9]+)`)

// dnatTargets counts each endpoint of 10.150.0.0/16 (the process specs' endpoints; other
// specs' Services share the API server) the table sends connections to.
func dnatTargets(table string) map[string]int {
	out := map[string]int{}
	for _, m := range dnatTarget.FindAllStringSubmatch(table, -1) {
		out[m[1]+":"+m[2]]++
	}
	return out
}

// endpointErrors counts endpoints missing from got and endpoints in got that are unexpected or
// programmed more than once.
func endpointErrors(want []string, got map[string]int) (lost, duplicated int) {
	wanted := map[string]bool{}
	for _, w := range want {
		wanted[w] = true
		if got[w] == 0 {
			lost++
		}
	}
	for ep, n := range got {
		if !wanted[ep] {
			duplicated += n
		} else if n > 1 {
			duplicated += n - 1
		}
	}
	return lost, duplicated
}
