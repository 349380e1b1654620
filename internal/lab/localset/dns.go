package localset

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// A member's DNS is fleetslice-dns serving clusterset.local with fleetslice's plugin and
// cluster.local with CoreDNS's kubernetes plugin, as a member's cluster DNS would.
//
// Pods of a local ClusterSet have no containers: kwok runs a `kubectl exec` command on the host
// (its ClusterExec resource, with a local target). For that command to resolve names the way it
// would inside a Pod, the member's kwok controller runs in a private mount namespace where
// /etc/resolv.conf is a bind mount of a file naming the member's DNS; the commands it starts
// inherit that namespace. Resolvers read resolv.conf's nameservers on port 53 only, so each
// member's DNS listens on port 53 of its own loopback address (127.53.x.y): binding port 53 and
// mounting need root. Without root, or without unshare, the DNS listens on a free port of
// 127.0.0.1 and exec'd commands use the host's resolver (MemberDNS.Exec is false).

// DNSBinary is the name of fleetslice-dns's binary in a bin directory.
const DNSBinary = "fleetslice-dns"

// MemberDNS is where one member's DNS listens.
type MemberDNS struct {
	// Address is host:port on loopback, UDP and TCP.
	Address string `json:"address"`
	// Exec reports whether commands run by `kubectl exec` in this member see Address as their
	// resolver.
	Exec bool `json:"exec"`
}

// dnsDir holds one member's Corefile, resolv.conf and kwok wrapper.
func dnsDir(workdir, member string) string { return filepath.Join(workdir, "dns", member) }

// hostExec is kwok's configuration that runs every Pod's exec'd commands on the host.
const hostExec = `---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterExec
metadata:
  name: fleetslice-host
spec:
  execs:
  - local: {}
`

// planDNS chooses a member's DNS address and writes its Corefile. When exec'd commands can be
// given that DNS, it also writes their resolv.conf and the kwok wrapper that mounts it, and
// returns the wrapper as the kwok binary to give kwokctl; otherwise kwokBinary is unchanged.
func (cs *ClusterSet) planDNS(member, kwokBinary string) (d MemberDNS, kwok string, err error) {
	dir := dnsDir(cs.Workdir, member)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return d, "", err
	}
	kwok = kwokBinary
	if ip, ok := privateResolverPossible(); ok {
		d = MemberDNS{Address: net.JoinHostPort(ip, "53"), Exec: true}
		resolv := filepath.Join(dir, "resolv.conf")
		// Pods' own search list starts with their namespace, which one file for every Pod
		// cannot give; the rest is what the kubelet writes.
		content := fmt.Sprintf("nameserver %s\nsearch svc.cluster.local cluster.local\noptions ndots:5\n", ip)
		if err := os.WriteFile(resolv, []byte(content), 0o644); err != nil {
			return d, "", err
		}
		kwok = filepath.Join(dir, "kwok-controller")
		// unshare execs in place (no --fork), so the pid kwokctl records is kwok's own.
		wrapper := fmt.Sprintf("#!/bin/sh\n# kwok with %s as /etc/resolv.conf (see internal/lab/localset/dns.go)\n"+
			"exec unshare --mount --propagation private /bin/sh -c 'mount --bind \"$0\" /etc/resolv.conf && exec \"$@\"' %s %s \"$@\"\n",
			member, shellQuote(resolv), shellQuote(kwokBinary))
		if err := os.WriteFile(kwok, []byte(wrapper), 0o755); err != nil {
			return d, "", err
		}
	} else {
		ports, err := defaultPortRegistry().reserve(1)
		if err != nil {
			return d, "", err
		}
		d = MemberDNS{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0])))}
	}
	return d, kwok, os.WriteFile(cs.Corefile(member), []byte(corefile(d.Address, cs.Kubeconfig, Context(member))), 0o644)
}

// shellQuote makes s one word for sh, whatever it holds.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Corefile is the path of a member's DNS configuration.
func (cs *ClusterSet) Corefile(member string) string {
	return filepath.Join(dnsDir(cs.Workdir, member), "Corefile")
}

// corefile serves both zones from the member's API server. No cache: a name must resolve as
// soon as the plugin knows it, and a cached NXDOMAIN from before the import would hide it.
// Names outside both zones are refused rather than forwarded, so the ClusterSet sends no query
// off the machine. Reverse names go to the clusterset plugin first: it answers an imported
// address's PTR only where the kubernetes plugin after it has none (docs/dns.md).
func corefile(address, kubeconfig, context string) string {
	host, port, _ := net.SplitHostPort(address)
	return fmt.Sprintf(`.:%s {
    bind %s
    errors
    clusterset clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig %s %s
        fallthrough in-addr.arpa ip6.arpa
    }
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig %s %s
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, port, host, strconv.Quote(kubeconfig), context, strconv.Quote(kubeconfig), context)
}

// privateResolverPossible reports whether kwok can be given its own /etc/resolv.conf and picks a
// free loopback address for port 53.
func privateResolverPossible() (string, bool) {
	if os.Geteuid() != 0 {
		return "", false
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		return "", false
	}
	// Root in a container may still lack the right to mount.
	if err := exec.Command("unshare", "--mount", "--propagation", "private", "mount", "--bind", "/dev/null", "/dev/null").Run(); err != nil {
		return "", false
	}
	for range 100 {
		ip := fmt.Sprintf("127.53.%d.%d", rand.IntN(256), 1+rand.IntN(254))
		if AddressFreeForDNS(net.JoinHostPort(ip, "53")) {
			return ip, true
		}
	}
	return "", false
}

// AddressFreeForDNS reports whether a DNS server could bind addr (host:port) right now: it binds
// UDP and TCP both, and a port free for one can be taken for the other.
func AddressFreeForDNS(addr string) bool {
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	t, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	t.Close()
	return true
}

// StartDNS runs fleetslice-dns from binDir for a member that Up planned a DNS for, and waits
// until both zones answer: clusterset.local's SOA (once the plugin's first list of ServiceImports
// arrived) and the kubernetes Service's cluster.local name (once the kubernetes plugin synced).
func (cs *ClusterSet) StartDNS(ctx context.Context, member, binDir string) (*Process, error) {
	d, ok := cs.DNS[member]
	if !ok {
		return nil, fmt.Errorf("no DNS planned for %s (Up without Options.DNS)", member)
	}
	p, err := cs.StartProcess("dns-"+member, filepath.Join(binDir, DNSBinary), "-conf", cs.Corefile(member))
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Minute)
	probes := []struct {
		name  string
		qtype uint16
	}{{"clusterset.local.", dns.TypeSOA}, {"kubernetes.default.svc.cluster.local.", dns.TypeA}}
	for {
		m, err := Resolve(ctx, d.Address, probes[0].name, probes[0].qtype)
		if err == nil && m.Rcode == dns.RcodeSuccess && (probes[0].qtype == dns.TypeSOA || len(m.Answer) > 0) {
			if probes = probes[1:]; len(probes) == 0 {
				return p, nil
			}
			continue
		}
		if err == nil {
			err = fmt.Errorf("%s %s: %s", probes[0].name, dns.TypeToString[probes[0].qtype], dns.RcodeToString[m.Rcode])
		}
		if exited, _ := p.Exited(); exited || time.Now().After(deadline) || ctx.Err() != nil {
			return p, errors.Join(fmt.Errorf("%s's DNS on %s did not answer: %v", member, d.Address, err),
				fmt.Errorf("%s", p.Describe(10)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Resolve asks one question over UDP, with a short timeout: a member's DNS is on loopback.
func Resolve(ctx context.Context, address, name string, qtype uint16) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: 500 * time.Millisecond}
	m, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype), address)
	return m, err
}
