package localset

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestKwokWrapperGivesItsProcessTheMembersResolvConf runs the wrapper planDNS writes around a
// stand-in for kwok that prints its pid, its /etc/resolv.conf and its arguments: the pid must
// be the wrapper's own (kwokctl stops kwok by the pid it started), the resolv.conf the member's,
// and the host's /etc/resolv.conf must be left as it was.
func TestKwokWrapperGivesItsProcessTheMembersResolvConf(t *testing.T) {
	// A workdir whose name sh would otherwise expand or split.
	dir := filepath.Join(t.TempDir(), "it's $HOME `x`")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := filepath.Join(dir, "kwok")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"$$\"\ncat /etc/resolv.conf\necho \"args: $*\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	hostBefore, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	cs := &ClusterSet{Workdir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	d, wrapper, err := cs.planDNS("cluster-1", fake)
	if err != nil {
		t.Fatal(err)
	}
	corefile, err := os.ReadFile(cs.Corefile("cluster-1"))
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(d.Address)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".:" + port + " {", "bind " + host, "clusterset clusterset.local", "kubernetes cluster.local", "kubeconfig " + strconv.Quote(cs.Kubeconfig) + " kwok-cluster-1"} {
		if !strings.Contains(string(corefile), want) {
			t.Errorf("Corefile lacks %q:\n%s", want, corefile)
		}
	}
	if !d.Exec {
		if wrapper != fake {
			t.Fatalf("without a private resolv.conf kwok must run as it is, got %s", wrapper)
		}
		t.Skip("kwok cannot get its own /etc/resolv.conf here (needs root and unshare); only the Corefile was checked")
	}
	if port != "53" || !strings.HasPrefix(host, "127.53.") {
		t.Fatalf("DNS on %s: resolvers only ask port 53", d.Address)
	}
	cmd := exec.Command(wrapper, "--config", "kwok.yaml")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("wrapper: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if lines[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Errorf("kwok ran as pid %s, the wrapper was %d: kwokctl would lose track of it", lines[0], cmd.Process.Pid)
	}
	if want := "nameserver " + host; !strings.Contains(string(out), want) {
		t.Errorf("kwok's /etc/resolv.conf lacks %q:\n%s", want, out)
	}
	if lines[len(lines)-1] != "args: --config kwok.yaml" {
		t.Errorf("kwok got %q", lines[len(lines)-1])
	}
	if hostAfter, _ := os.ReadFile("/etc/resolv.conf"); string(hostAfter) != string(hostBefore) {
		t.Errorf("the host's /etc/resolv.conf changed:\n%s", hostAfter)
	}
}
