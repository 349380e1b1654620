package statusview

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// DNSName is the name the multi-cluster services DNS specification gives a ServiceImport.
func (i Import) DNSName() string { return i.Name + "." + i.Namespace + ".svc.clusterset.local" }

// Ask puts one question to a member's DNS.
type Ask func(ctx context.Context, name string, qtype uint16) (*dns.Msg, error)

// ResolveImports asks the cluster's own DNS for every import's name, A and AAAA, and keeps what
// it answered in Import.Resolves: what a Pod of that cluster gets for the name.
func ResolveImports(ctx context.Context, view *Cluster, ask Ask) {
	for i := range view.Imports {
		view.Imports[i].Resolves = resolve(ctx, view.Imports[i].DNSName(), ask)
	}
}

// resolve summarises the answers for both families: the addresses, or why there are none.
func resolve(ctx context.Context, name string, ask Ask) string {
	var addrs, problems []string
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		m, err := ask(ctx, name, qtype)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", dns.TypeToString[qtype], err))
			continue
		case m == nil:
			problems = append(problems, dns.TypeToString[qtype]+": no reply")
			continue
		case m.Rcode != dns.RcodeSuccess:
			problems = append(problems, dns.RcodeToString[m.Rcode])
			continue
		}
		for _, rr := range m.Answer {
			switch rr := rr.(type) {
			case *dns.A:
				addrs = append(addrs, rr.A.String())
			case *dns.AAAA:
				addrs = append(addrs, rr.AAAA.String())
			}
		}
	}
	if len(addrs) > 0 {
		return strings.Join(addrs, ",")
	}
	if len(problems) == 0 {
		return "no address"
	}
	return strings.Join(slices.Compact(problems), "; ")
}
