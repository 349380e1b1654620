package dnsbench

import (
	"context"
	"fmt"
	"time"

	"github.com/miekg/dns"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// propagation is how long new objects took to resolve, one zone's samples.
type propagation struct {
	// FromStored starts when the API server had accepted the create; FromCall before the call.
	FromStored, FromCall []time.Duration
	// Missing counts names that never resolved within the limit.
	Missing int
	// FirstMissing says why the first one did not.
	FirstMissing string
}

// propagationLimit is the longest a new name may take to resolve (issue 12: one second); the
// wait goes on a little longer, so a slow answer is measured rather than cut off.
const (
	propagationLimit = time.Second
	propagationWait  = 5 * time.Second
)

// extraBase numbers the Services propagate creates.
const extraBase = 1_000_000

// propagate creates samples more Services and ServiceImports one at a time, after the load
// phases, and times each from its create until the server answers its name with its address.
func (w *world) propagate(ctx context.Context, s *server, samples int) (clusterset, cluster *propagation, err error) {
	clusterset, cluster = &propagation{}, &propagation{}
	for range samples {
		// Numbered apart from the loaded ones, which a larger size goes on creating.
		svc, imp := objects(extraBase + w.extra)
		w.extra++
		if err := timeCreate(ctx, w.c, s, svc, func() (string, string) {
			return dns.Fqdn(svc.Name + "." + namespace + ".svc.cluster.local"), svc.Spec.ClusterIP
		}, cluster); err != nil {
			return nil, nil, err
		}
		if err := timeCreate(ctx, w.c, s, imp, func() (string, string) {
			return dns.Fqdn(imp.Name + "." + namespace + ".svc.clusterset.local"), imp.Spec.IPs[0]
		}, clusterset); err != nil {
			return nil, nil, err
		}
	}
	return clusterset, cluster, nil
}

// timeCreate creates obj and waits for the name and address that answer reads off the created
// object (a Service's ClusterIP is known only then).
func timeCreate(ctx context.Context, c client.Client, s *server, obj client.Object, answer func() (string, string), into *propagation) error {
	called := time.Now()
	if err := c.Create(ctx, obj); err != nil {
		return fmt.Errorf("creating %s: %w", obj.GetName(), err)
	}
	stored := time.Now()
	name, ip := answer()
	at, err := s.waitFor(ctx, name, ip, propagationWait)
	if err != nil {
		into.Missing++
		if into.FirstMissing == "" {
			into.FirstMissing = err.Error()
		}
		return ctx.Err()
	}
	into.FromStored = append(into.FromStored, at.Sub(stored))
	into.FromCall = append(into.FromCall, at.Sub(called))
	return nil
}
