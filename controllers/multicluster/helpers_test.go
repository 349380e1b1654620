package multicluster_test

import (
	"context"
	"fmt"
	"slices"
	"sort"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/controllers/multicluster/sliceplan"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

// newNamespace creates one namespace of the same (random) name in each given member, or in
// every member when none is given: namespace sameness.
func newNamespace(ctx context.Context, in ...*member) string {
	if len(in) == 0 {
		in = members
	}
	name := "mcs-" + rand.String(6)
	for _, m := range in {
		Expect(m.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	}
	return name
}

// httpService is the Service the specs export: selected and labelled app=<name>, one TCP port
// 80 named http to 8080.
func httpService(ns, name string) *builders.ServiceWrapper {
	return builders.MakeService(ns, name).Label("app", name).Selector("app", name).Port("http", 80, intstr.FromInt32(8080))
}

// create creates obj, a builder's output, in m after applying mutate, and returns it as m's API
// server stored it.
func create[T client.Object](ctx context.Context, m *member, obj T, mutate ...func(T)) T {
	for _, f := range mutate {
		f(obj)
	}
	Expect(m.Client.Create(ctx, obj)).To(Succeed())
	return obj
}

// createSlice stands in for the member's EndpointSlice controller (envtest runs none).
func createSlice(ctx context.Context, m *member, ns, service, name string, ips ...string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service,
			discoveryv1.LabelManagedBy:   "endpointslice-controller.fleetslice.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for i, ip := range ips {
		zone := []string{"zone-a", "zone-b", "zone-c"}[i%3]
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(fmt.Sprintf("%s-node-%d", m.Name, i)),
			Zone:       ptr.To(zone),
			Hints:      &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zone}}},
		})
	}
	Expect(m.Client.Create(ctx, slice)).To(Succeed())
	return slice
}

func export(ctx context.Context, m *member, ns, name string, mutate func(*mcsv1beta1.ServiceExport)) {
	e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if mutate != nil {
		mutate(e)
	}
	Expect(m.Client.Create(ctx, e)).To(Succeed())
}

func unexport(ctx context.Context, m *member, ns, name string) {
	Expect(m.Client.Delete(ctx, &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})).To(Succeed())
}

// serviceImport returns the ServiceImport, or nil when it does not exist.
func serviceImport(ctx context.Context, m *member, ns, name string) *mcsv1beta1.ServiceImport {
	si := &mcsv1beta1.ServiceImport{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, si)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return si
}

// importClusters returns the clusters listed in the ServiceImport's status (nil without one).
func importClusters(ctx context.Context, m *member, ns, name string) []string {
	si := serviceImport(ctx, m, ns, name)
	if si == nil {
		return nil
	}
	out := []string{}
	for _, c := range si.Status.Clusters {
		out = append(out, c.Cluster)
	}
	return out
}

func importedSlices(ctx context.Context, m *member, ns, name string) []discoveryv1.EndpointSlice {
	list := &discoveryv1.EndpointSliceList{}
	Expect(m.Client.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{
		mcsv1beta1.LabelServiceName: name, discoveryv1.LabelManagedBy: sliceplan.ManagedBy,
	})).To(Succeed())
	return list.Items
}

// importedFrom returns the source clusters of the imported slices, sorted, one per slice.
func importedFrom(ctx context.Context, m *member, ns, name string) []string {
	var out []string
	for _, s := range importedSlices(ctx, m, ns, name) {
		out = append(out, s.Labels[mcsv1beta1.LabelSourceCluster])
	}
	sort.Strings(out)
	return out
}

// importedAddresses returns every address imported for the Service, sorted.
func importedAddresses(ctx context.Context, m *member, ns, name string) []string {
	var out []string
	for _, s := range importedSlices(ctx, m, ns, name) {
		for _, ep := range s.Endpoints {
			out = append(out, ep.Addresses...)
		}
	}
	slices.Sort(out)
	return out
}

func derivedService(ctx context.Context, m *member, ns, name string) *corev1.Service {
	svc := &corev1.Service{}
	err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: names.DerivedServiceName(ns, name)}, svc)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return svc
}

// exportCondition returns the ServiceExport's condition of type t, or nil.
func exportCondition(ctx context.Context, m *member, ns, name string, t mcsv1beta1.ServiceExportConditionType) *metav1.Condition {
	e := &mcsv1beta1.ServiceExport{}
	if err := m.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, e); err != nil {
		return nil
	}
	return meta.FindStatusCondition(e.Status.Conditions, string(t))
}

// conditionOf is a Gomega-friendly summary "Status/Reason" of an export condition.
func conditionOf(ctx context.Context, m *member, ns, name string, t mcsv1beta1.ServiceExportConditionType) func() string {
	return func() string {
		cond := exportCondition(ctx, m, ns, name, t)
		if cond == nil {
			return "<none>"
		}
		return string(cond.Status) + "/" + cond.Reason
	}
}
