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
	"github.com/coredns/coredns/plugin/pkg/nonwriter"
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
	z := records.Zone{Name: zone, TTL: c.TTL, Serial: c.Store.Serial(), Clusterset: c.clustersetZone()}
	m := records.Respond(z, c.Store, r)
	if m.Rcode == dns.RcodeNameError && c.Fall.Through(state.Name()) {
		return plugin.NextOrFailure(c.Name(), c.Next, ctx, w, r)
	}
	if state.QType() == dns.TypePTR && records.IsReverse(zone) && c.Fall.Through(state.Name()) && c.Next != nil {
		if theirs := c.askNext(ctx, w, r); theirs != nil {
			m = theirs
		}
	}
	if err := w.WriteMsg(m); err != nil {
		return dns.RcodeServerFailure, err
	}
	return dns.RcodeSuccess, nil
}

// askNext returns the next plugins' reply to a PTR query when it has records, else nil. The
// specification (2.3.3, 2.4.3) creates PTR records only for addresses "that do not already
// have" one: the cluster's own records, such as the cluster.local name CoreDNS's kubernetes
// plugin gives a local Service's ClusterIP or a local Pod behind a headless Service, win over
// the clusterset name. The plugins after this one are where those records are, so they are
// asked first; the reply is captured, not written.
//
// Records that cannot be sent are dropped first: the kubernetes plugin indexes every
// EndpointSlice, and for an address in an imported headless slice (which names no Service in
// kubernetes.io/service-name) it adds a PTR record whose target has an empty label. The
// address's other records, such as the member's own Pod's, still win; with none left the
// clusterset record answers.
func (c *Clusterset) askNext(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) *dns.Msg {
	capture := nonwriter.New(w)
	if _, err := c.Next.ServeDNS(ctx, capture, r); err != nil || capture.Msg == nil {
		return nil
	}
	m := capture.Msg
	if m.Rcode != dns.RcodeSuccess {
		return nil
	}
	m.Answer, m.Ns, m.Extra = sendable(m.Answer), sendable(m.Ns), sendable(m.Extra)
	if len(m.Answer) == 0 {
		return nil
	}
	if _, err := m.Pack(); err != nil {
		return nil
	}
	return m
}

// sendable returns the records of rrs that pack.
func sendable(rrs []dns.RR) []dns.RR {
	out := rrs[:0]
	buf := make([]byte, dns.MaxMsgSize)
	for _, rr := range rrs {
		if _, err := dns.PackRR(rr, buf, 0, nil, false); err == nil {
			out = append(out, rr)
		}
	}
	return out
}

// clustersetZone is the zone PTR records point into: the first zone the plugin serves that is
// not a reverse zone, else the one the specification fixes.
func (c *Clusterset) clustersetZone() string {
	for _, z := range c.Zones {
		if !records.IsReverse(z) {
			return z
		}
	}
	return records.DefaultClustersetZone
}
