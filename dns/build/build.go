// Package build assembles fleetslice-dns the way CoreDNS documents for external plugins: it
// links in the CoreDNS plugins a member's DNS needs plus clusterset, and orders them in
// dnsserver.Directives. cmd/fleetslice-dns and the tests that serve the plugin share it, so
// both run the same server.
package build

import (
	"github.com/coredns/coredns/core/dnsserver"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"

	_ "github.com/fleetslice/fleetslice/dns/clusterset"
)

// Directives is the order plugins see a query in: CoreDNS's own order for the plugins linked
// in (those above and the ones they bring: metadata, debug, dnstap, transfer), with clusterset just before kubernetes, so caching, logging and metrics wrap both alike and
// forward only sees what neither zone owns.
var Directives = []string{
	"metadata",
	"reload",
	"bind",
	"debug",
	"ready",
	"health",
	"prometheus",
	"errors",
	"log",
	"dnstap",
	"loadbalance",
	"cache",
	"transfer",
	"clusterset",
	"kubernetes",
	"loop",
	"forward",
	"whoami",
}

// Install makes Directives the server's plugin order; call it before starting CoreDNS.
func Install() {
	dnsserver.Directives = Directives
}
