// Package clusterset is the CoreDNS plugin "clusterset": it answers the multi-cluster services
// DNS specification (KEP-1645) for a clusterset zone, usually clusterset.local, from the
// ServiceImports and imported EndpointSlices of the cluster it runs in. The answers themselves
// are decided by package records; this package parses the Corefile, keeps the informer-backed
// Store and serves queries from it.
package clusterset

import (
	"context"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/request"
	"github.com/miekg/dns"

	"github.com/fleetslice/fleetslice/dns/records"
)

// Name is the plugin's name in a Corefile.
const Name = "clusterset"

// DefaultTTL is the TTL of every answer unless the Corefile says otherwise: the default of
// CoreDNS's kubernetes plugin, so a name under clusterset.local is cached no longer than one
// under cluster.local, and a withdrawn import stops resolving within seconds while caches
// still absorb bursts of queries.
const DefaultTTL = 5

// Lookup is what the plugin answers from: the Store, or anything else in tests.
type Lookup interface {
	records.Lookup
	Serial() uint32
	Synced() bool
}

// Clusterset serves the clusterset zones.
type Clusterset struct {
	Next  plugin.Handler
	Zones []string
	TTL   uint32
	Fall  fall.F
	Store Lookup
}

// Name implements plugin.Handler.
func (c *Clusterset) Name() string { return Name }

// Ready implements CoreDNS's ready plugin's Readiness: ready once the imports are listed.
func (c *Clusterset) Ready() bool { return c.Store.Synced() }

// ServeDNS implements plugin.Handler. Names outside the zones go to the next plugin, and so do
// names this zone does not have when fallthrough covers them. Until the first lists arrive every
// query gets SERVFAIL: a NXDOMAIN then would be cached for names that exist.
func (c *Clusterset) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	if len(r.Question) != 1 {
		return dns.RcodeFormatError, nil
	}
	state := request.Request{W: w, Req: r}
	zone := plugin.Zones(c.Zones).Matches(state.Name())
	if zone == "" {
		return plugin.NextOrFailure(c.Name(), c.Next, ctx, w, r)
	}
	if !c.Store.Synced() {
		return dns.RcodeServerFailure, nil
	}
	m := records.Respond(records.Zone{Name: zone, TTL: c.TTL, Serial: c.Store.Serial()}, c.Store, r)
	if m.Rcode == dns.RcodeNameError && c.Fall.Through(state.Name()) {
		return plugin.NextOrFailure(c.Name(), c.Next, ctx, w, r)
	}
	if err := w.WriteMsg(m); err != nil {
		return dns.RcodeServerFailure, err
	}
	return dns.RcodeSuccess, nil
}
