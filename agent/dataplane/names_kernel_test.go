package dataplane

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"
)

// maxLengthService has every name at its Kubernetes maximum (63-character namespace and
// name, 15-character port name), affinity (the longest object names: they add the endpoint and
// the timeout) and the longest IPv6 endpoint spelling.
func maxLengthService(family knftables.Family) Service {
	ns, name := strings.Repeat("n", 63), strings.Repeat("s", 63)
	ip, ep := "10.96.255.255", "255.255.255.255:65535"
	if family == knftables.IPv6Family {
		ip, ep = "fd00:96::ffff", "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe]:65535"
	}
	return Service{Namespace: ns, Name: name, ClusterIPs: ips(ip), AffinityTimeout: 86400 * time.Second, Ports: []Port{
		{Name: strings.Repeat("p", 15), Protocol: SCTP, Port: 65535, NodePort: 32767, ExternalLocal: true,
			Endpoints:         []Endpoint{{Addr: netip.MustParseAddrPort(ep), Local: true}, {Addr: netip.MustParseAddrPort(strings.Replace(ep, "5:", "4:", 1))}},
			ExternalEndpoints: []Endpoint{{Addr: netip.MustParseAddrPort(ep), Local: true}}},
	}}
}

// TestObjectNamesFitNftables checks, without a kernel, that names derived from the longest
// inputs stay under NFT_NAME_MAXLEN (256 bytes with the terminating NUL, in the kernel's
// uapi nf_tables.h), and the kernel test below that the kernel takes them.
func TestObjectNamesFitNftables(t *testing.T) {
	for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		dump, stats, err := Render(context.Background(), []Service{maxLengthService(fam)}, Options{Family: fam})
		if err != nil || len(stats.Rejected) != 0 {
			t.Fatalf("%s: %v %v", fam, err, stats.Rejected)
		}
		longest := ""
		for _, line := range strings.Split(dump, "\n") {
			f := strings.Fields(line)
			if len(f) >= 5 && f[0] == "add" && (f[1] == "chain" || f[1] == "set" || f[1] == "map") && len(f[4]) > len(longest) {
				longest = f[4]
			}
		}
		if len(longest) >= unix.NFT_NAME_MAXLEN || len(longest) > maxObjectNameLength {
			t.Errorf("%s: object name of %d bytes: %s", fam, len(longest), longest)
		}
	}
}

func TestKernelAcceptsMaxLengthNames(t *testing.T) {
	requireKernel(t)
	ns := enterNetns(t, newNetns(t, uniquePrefix(t), "names"))
	for _, fam := range []knftables.Family{knftables.IPv4Family, knftables.IPv6Family} {
		for _, backend := range kernelBackends {
			s, _ := openBackend(t, ns, backend, fam, Options{})
			var err error
			ns.do(func() { _, err = s.Sync(context.Background(), []Service{maxLengthService(fam)}, true) })
			if err != nil {
				t.Errorf("%s via %s: %v", fam, backend, err)
			}
		}
	}
}
