package main

import (
	"context"
	"flag"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

func parse(t *testing.T, args ...string) (*flags, error) {
	t.Helper()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	fs.SetOutput(new(strings.Builder))
	f := bindFlags(fs)
	return f, fs.Parse(args)
}

func TestFlags(t *testing.T) {
	t.Setenv("NODE_NAME", "from-env")
	tests := []struct {
		args                  []string
		node, families, cidrs string
		wantErr               bool
	}{
		{args: nil, node: "from-env", families: "IPv4,IPv6"},
		{args: []string{"--node-name=n1", "--ip-families=ipv6"}, node: "n1", families: "IPv6"},
		{args: []string{"--ip-families", "IPv4, IPv4"}, node: "from-env", families: "IPv4"},
		{args: []string{"--pod-cidr=10.244.0.0/16,fd00:244::/56", "--pod-cidr", "10.245.1.7/24"}, node: "from-env",
			families: "IPv4,IPv6", cidrs: "10.244.0.0/16,fd00:244::/56,10.245.1.0/24"},
		{args: []string{"--pod-cidr=10.244.0.0"}, wantErr: true},
		{args: []string{"--ip-families=ipx"}, wantErr: true},
	}
	for _, tt := range tests {
		f, err := parse(t, tt.args...)
		if (err != nil) != tt.wantErr {
			t.Fatalf("%q: error %v, want error %v", tt.args, err, tt.wantErr)
		}
		if err != nil {
			continue
		}
		if f.agent.NodeName != tt.node || f.families.String() != tt.families || f.podCIDRs.String() != tt.cidrs {
			t.Errorf("%q: node %q families %q cidrs %q; want %q %q %q", tt.args,
				f.agent.NodeName, f.families.String(), f.podCIDRs.String(), tt.node, tt.families, tt.cidrs)
		}
	}
}

func TestRunRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--node-name="},
		{"--node-name=n", "--dataplane=ipvs"},
		{"--node-name=n", "--min-sync-interval=0s"},
		{"--node-name=n", "--ip-families="},
		{"--node-name=n", "--nftables-backend=iptables"},
		{"--node-name=n", "--cluster-id=East_1"},
		{"--node-name=n", "--gc-percent=-1"},
	} {
		f, err := parse(t, args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := run(t.Context(), nil, f, testr.New(t)); err == nil {
			t.Errorf("%q: run accepted it", args)
		}
	}
}

func TestCleanupRejectsAnUnknownBackend(t *testing.T) {
	f, err := parse(t, "--cleanup", "--nftables-backend=iptables")
	if err != nil {
		t.Fatal(err)
	}
	if f.backend != "iptables" || cleanup(t.Context(), f) == nil {
		t.Errorf("cleanup through backend %q accepted", f.backend)
	}
	if g, _ := parse(t); g.backend != backendNetlink {
		t.Errorf("default backend %q, want netlink", g.backend)
	}
}

// TestDryRunForANodeThatExistsOnlyInTheAPI runs the agent the way
// `fleetslice run` does for a kwok node: dry-run, ruleset to a file, and
// checks the file and the readiness endpoint.
func TestDryRunForANodeThatExistsOnlyInTheAPI(t *testing.T) {
	cluster, err := testenv.Start("cmd-agent")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	}()
	ctx := t.Context()
	c := cluster.Client
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kwok-node-0", Labels: map[string]string{corev1.LabelTopologyZone: "zone-a"}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.0.7"}, NodeName: ptr.To("kwok-node-0")}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}},
	}
	for _, obj := range []client.Object{node, svc, slice} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}

	out := filepath.Join(t.TempDir(), "kwok-node-0.nft")
	probe := freeAddress(t)
	f, err := parse(t, "--node-name=kwok-node-0", "--dataplane=dry-run", "--dry-run-output="+out,
		"--metrics-bind-address=0", "--health-probe-bind-address="+probe, "--min-sync-interval=50ms", "--ip-families=IPv4")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, cluster.Config, f, testr.New(t)) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	want := svc.Spec.ClusterIP + " . tcp . 80 comment \"" + svc.Namespace + "/" + svc.Name + ":"
	wantEndpoint := svc.Spec.ClusterIP + " . 80 . 0 : 10.244.0.7 . 8080"
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(out)
		ready := get("http://" + probe + "/readyz")
		if strings.Contains(string(b), want) && strings.Contains(string(b), wantEndpoint) && ready == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30s: readyz %d, ruleset file:\n%s", ready, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code := get("http://" + probe + "/healthz"); code != http.StatusOK {
		t.Errorf("healthz answered %d", code)
	}
}

func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func get(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
