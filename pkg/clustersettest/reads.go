package clustersettest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// wait polls probe until it reports done, fails, or Options.WaitTimeout (or ctx) ends; the
// error then says what was awaited and what probe saw last.
func (m *Member) wait(ctx context.Context, what string, probe func(context.Context) (done bool, seen string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, m.opts.WaitTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen := "nothing yet"
	for {
		done, s, err := probe(ctx)
		if err != nil {
			return fmt.Errorf("member %s: waiting for %s: %w", m.Name, what, err)
		}
		// A read cut short by the deadline says nothing about the cluster.
		if s != "" && ctx.Err() == nil {
			seen = s
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member %s: gave up waiting for %s (%v); last seen: %s", m.Name, what, context.Cause(ctx), seen)
		case <-tick.C:
		}
	}
}

// readFailure is what a probe saw when its read failed: the error, unless the read was cut short
// by the wait's own deadline (client-go's rate limiter refuses a request that could not finish in
// time before the context ends), which says nothing about the cluster.
func readFailure(ctx context.Context, err error) string {
	if ctx.Err() != nil || strings.Contains(err.Error(), "would exceed context deadline") {
		return ""
	}
	return err.Error()
}

// Export creates a ServiceExport for the Service namespace/name.
func (m *Member) Export(ctx context.Context, namespace, name string) error {
	e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	if err := m.Client.Create(ctx, e); err != nil {
		return fmt.Errorf("member %s: exporting %s/%s: %w", m.Name, namespace, name, err)
	}
	return nil
}

// ExportCondition returns the ServiceExport's condition of type t, or nil while there is none.
func (m *Member) ExportCondition(ctx context.Context, namespace, name string, t mcsv1beta1.ServiceExportConditionType) (*metav1.Condition, error) {
	e := &mcsv1beta1.ServiceExport{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, e); err != nil {
		return nil, err
	}
	return meta.FindStatusCondition(e.Status.Conditions, string(t)), nil
}

// WaitForServiceImport waits until the member's ServiceImport namespace/name is Ready for its
// current generation, and returns it.
func (m *Member) WaitForServiceImport(ctx context.Context, namespace, name string) (*mcsv1beta1.ServiceImport, error) {
	si := &mcsv1beta1.ServiceImport{}
	err := m.wait(ctx, fmt.Sprintf("ServiceImport %s/%s to be ready", namespace, name), func(ctx context.Context) (bool, string, error) {
		if err := m.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, si); err != nil {
			return false, readFailure(ctx, err), nil
		}
		cond := meta.FindStatusCondition(si.Status.Conditions, string(mcsv1beta1.ServiceImportConditionReady))
		if cond == nil {
			return false, "a ServiceImport without a Ready condition", nil
		}
		seen := fmt.Sprintf("Ready=%s reason %s (%q) for generation %d of %d, clusters %v",
			cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration, si.Generation, importClusters(si))
		return cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == si.Generation, seen, nil
	})
	if err != nil {
		return nil, err
	}
	return si, nil
}

func importClusters(si *mcsv1beta1.ServiceImport) []string {
	out := []string{}
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

// ImportedEndpoints returns the endpoints the member imported for the multi-cluster Service
// namespace/name, by source cluster (its own included).
func (m *Member) ImportedEndpoints(ctx context.Context, namespace, name string) (map[string][]discoveryv1.Endpoint, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := m.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: name, discoveryv1.LabelManagedBy: sliceplan.ManagedBy,
	})
	if err != nil {
		return nil, fmt.Errorf("member %s: listing imported slices of %s/%s: %w", m.Name, namespace, name, err)
	}
	out := map[string][]discoveryv1.Endpoint{}
	for _, s := range list.Items {
		source := s.Labels[mcsv1beta1.LabelSourceCluster]
		out[source] = append(out[source], s.Endpoints...)
	}
	return out, nil
}

// ImportedAddresses is ImportedEndpoints reduced to the sorted addresses of ready endpoints, by
// source cluster; a source without ready endpoints is left out.
func (m *Member) ImportedAddresses(ctx context.Context, namespace, name string) (map[string][]string, error) {
	endpoints, err := m.ImportedEndpoints(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for source, eps := range endpoints {
		for _, ep := range eps {
			if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
				out[source] = append(out[source], ep.Addresses...)
			}
		}
		slices.Sort(out[source])
	}
	return out, nil
}

// WaitForImportedAddresses waits until ImportedAddresses equals want (cluster → addresses, in
// any order).
func (m *Member) WaitForImportedAddresses(ctx context.Context, namespace, name string, want map[string][]string) error {
	sorted := map[string][]string{}
	for k, v := range want {
		if len(v) > 0 {
			sorted[k] = slices.Sorted(slices.Values(v))
		}
	}
	what := fmt.Sprintf("the ready endpoints imported for %s/%s to be %s", namespace, name, formatByCluster(sorted))
	return m.wait(ctx, what, func(ctx context.Context) (bool, string, error) {
		got, err := m.ImportedAddresses(ctx, namespace, name)
		if err != nil {
			return false, readFailure(ctx, err), nil
		}
		return maps.EqualFunc(got, sorted, slices.Equal), formatByCluster(got), nil
	})
}

func formatByCluster(m map[string][]string) string {
	if len(m) == 0 {
		return "{}"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+": "+strings.Join(m[k], ","))
	}
	return "{" + strings.Join(parts, "; ") + "}"
}

// ServiceSlices returns the EndpointSlices fleetslice's EndpointSlice controller wrote for the
// member's Service namespace/name.
func (m *Member) ServiceSlices(ctx context.Context, namespace, name string) ([]discoveryv1.EndpointSlice, error) {
	list := &discoveryv1.EndpointSliceList{}
	err := m.Client.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{
		discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: endpointslice.ManagedBy,
	})
	if err != nil {
		return nil, fmt.Errorf("member %s: listing the slices of %s/%s: %w", m.Name, namespace, name, err)
	}
	return list.Items, nil
}

// Hint is one endpoint of a Service with the zones its topology hint sends traffic from.
type Hint struct {
	Address string
	// Zone is the endpoint's own zone.
	Zone string
	// ForZones is empty when the endpoint carries no hint.
	ForZones []string
}

// ServiceHints returns the ready endpoints of the member's Service namespace/name with their
// hints, sorted by address.
func (m *Member) ServiceHints(ctx context.Context, namespace, name string) ([]Hint, error) {
	found, err := m.ServiceSlices(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	var out []Hint
	for _, s := range found {
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 || (ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			h := Hint{Address: ep.Addresses[0], ForZones: []string{}}
			if ep.Zone != nil {
				h.Zone = *ep.Zone
			}
			if ep.Hints != nil {
				for _, z := range ep.Hints.ForZones {
					h.ForZones = append(h.ForZones, z.Name)
				}
			}
			out = append(out, h)
		}
	}
	slices.SortFunc(out, func(a, b Hint) int { return strings.Compare(a.Address, b.Address) })
	return out, nil
}

// errNotCuttable is returned by the broker link helpers without Options.CuttableBrokerLinks.
var errNotCuttable = errors.New("the ClusterSet was started without CuttableBrokerLinks")
