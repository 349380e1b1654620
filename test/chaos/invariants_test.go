package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/endpointslice"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
)

// maxPerSlice is the manager's default --max-endpoints-per-slice.
const maxPerSlice = 100

// audit is what one look at the ClusterSet found wrong.
type audit struct {
	// lost counts ready Pods missing from their Service's slices (or from an import);
	// duplicated counts addresses listed more than once.
	lost, duplicated int
	problems         []string
}

func (a *audit) problem(format string, args ...any) {
	a.problems = append(a.problems, fmt.Sprintf(format, args...))
}

func (a audit) err() error {
	if len(a.problems) == 0 {
		return nil
	}
	shown := a.problems
	if len(shown) > 8 {
		shown = append(shown[:8:8], fmt.Sprintf("... and %d more", len(a.problems)-8))
	}
	return fmt.Errorf("%d lost, %d duplicated:\n  %s", a.lost, a.duplicated, strings.Join(shown, "\n  "))
}

// readyPods returns, per Service of the member's namespace, the addresses of its ready Pods.
func readyPods(ctx context.Context, m *member) (map[string][]string, error) {
	services := &corev1.ServiceList{}
	if err := m.client.List(ctx, services, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	pods := &corev1.PodList{}
	if err := m.client.List(ctx, pods, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, svc := range services.Items {
		if len(svc.Spec.Selector) == 0 {
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		out[svc.Name] = []string{}
		for _, p := range pods.Items {
			if sel.Matches(labels.Set(p.Labels)) && p.DeletionTimestamp == nil && p.Status.PodIP != "" && podReady(&p) {
				out[svc.Name] = append(out[svc.Name], p.Status.PodIP)
			}
		}
	}
	return out, nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// compare checks that slices list every address of want as ready exactly once and nothing else.
func (a *audit) compare(where string, slices []discoveryv1.EndpointSlice, want []string) {
	seen := map[string]int{}
	ready := map[string]bool{}
	for _, s := range slices {
		if len(s.Endpoints) > maxPerSlice {
			a.problem("%s: slice %s holds %d endpoints, over the cap of %d", where, s.Name, len(s.Endpoints), maxPerSlice)
		}
		for _, ep := range s.Endpoints {
			for _, addr := range ep.Addresses {
				seen[addr]++
				if ep.Conditions.Ready == nil || *ep.Conditions.Ready {
					ready[addr] = true
				}
			}
		}
	}
	for addr, n := range seen {
		if n > 1 {
			a.duplicated++
			a.problem("%s: %s listed %d times", where, addr, n)
		}
	}
	for _, addr := range want {
		if !ready[addr] {
			a.lost++
			a.problem("%s: ready Pod %s missing", where, addr)
		}
		delete(ready, addr)
	}
	for addr := range ready {
		a.problem("%s: %s listed ready but no ready Pod has it", where, addr)
	}
}

// check looks at the whole ClusterSet once.
func check(ctx context.Context) (audit, error) {
	var a audit
	ready := map[string]map[string][]string{}
	for _, m := range fleet {
		pods, err := readyPods(ctx, m)
		if err != nil {
			return a, err
		}
		ready[m.name] = pods
		if err := rolledOut(ctx, m); err != nil {
			a.problem("%v", err)
		}
	}
	for _, m := range fleet {
		list := &discoveryv1.EndpointSliceList{}
		if err := m.client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			return a, err
		}
		local := map[string][]discoveryv1.EndpointSlice{}
		imported := map[string][]discoveryv1.EndpointSlice{} // by service/source
		for _, s := range list.Items {
			switch managedBy := s.Labels[discoveryv1.LabelManagedBy]; managedBy {
			case endpointslice.ManagedBy:
				local[s.Labels[discoveryv1.LabelServiceName]] = append(local[s.Labels[discoveryv1.LabelServiceName]], s)
			case sliceplan.ManagedBy:
				key := s.Labels[mcsv1beta1.LabelServiceName] + "/" + s.Labels[mcsv1beta1.LabelSourceCluster]
				imported[key] = append(imported[key], s)
			default:
				a.problem("%s: slice %s is managed by %q", m.name, s.Name, managedBy)
			}
		}
		for svc, want := range ready[m.name] {
			a.compare(m.name+"/"+svc, local[svc], want)
		}
		// Every member imports every export, its own included.
		for _, source := range fleet {
			for _, svc := range exported(source.name) {
				a.compare(fmt.Sprintf("%s/%s imported from %s", m.name, svc, source.name),
					imported[svc+"/"+source.name], ready[source.name][svc])
				delete(imported, svc+"/"+source.name)
				si := &mcsv1beta1.ServiceImport{}
				if err := m.client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: svc}, si); err != nil {
					a.problem("%s: ServiceImport %s: %v", m.name, svc, err)
				}
			}
		}
		for key := range imported {
			a.problem("%s: imported slices for %s that no member exports", m.name, key)
		}
	}
	return a, nil
}

// settled waits until every invariant holds and every agent's table equals a fresh render, and
// returns how long that took from since.
func settled(ctx context.Context, since time.Time) time.Duration {
	GinkgoHelper()
	var last audit
	Eventually(func() error {
		a, err := check(ctx)
		if err != nil {
			return err
		}
		last = a
		return a.err()
	}).WithContext(ctx).WithTimeout(size.Settle).WithPolling(500 * time.Millisecond).Should(Succeed())
	converged := time.Since(since)
	Expect(last.lost + last.duplicated).To(BeZero())
	var errs []error
	for _, m := range fleet {
		errs = append(errs, m.agentMatchesFreshRender(ctx))
	}
	Expect(errors.Join(errs...)).To(Succeed())
	return converged
}

// sortedCopy returns a sorted copy, for stable messages.
func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
