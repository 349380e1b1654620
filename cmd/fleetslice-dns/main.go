// Command fleetslice-dns is CoreDNS v1.15.0 with fleetslice's clusterset plugin, which answers
// <service>.<namespace>.svc.clusterset.local from the member's ServiceImports (see docs/dns.md).
// It takes CoreDNS's flags: -conf Corefile, -plugins, -version.
package main

import (
	"github.com/coredns/coredns/coremain"

	"github.com/fleetslice/fleetslice/dns/build"
)

func main() {
	build.Install()
	coremain.Run()
}
