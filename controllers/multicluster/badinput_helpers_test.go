package multicluster_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// importState is what a member serves for one import: every object the import controller
// writes for it, by name and resourceVersion, and the endpoints. Equal states mean nothing was
// written for that import in between.
type importState struct {
	Import    string
	Derived   string
	Slices    []string
	Addresses []string
}

func importStateOf(ctx context.Context, m *member, ns, name string) importState {
	var st importState
	if si := serviceImport(ctx, m, ns, name); si != nil {
		st.Import = si.ResourceVersion + fmt.Sprint(si.Spec.Ports, si.Status.Clusters)
	}
	if d := derivedService(ctx, m, ns, name); d != nil {
		st.Derived = d.Name + "@" + d.ResourceVersion
	}
	for _, s := range importedSlices(ctx, m, ns, name) {
		st.Slices = append(st.Slices, s.Name+"@"+s.ResourceVersion)
	}
	slices.Sort(st.Slices)
	st.Addresses = importedAddresses(ctx, m, ns, name)
	return st
}

// bystander is a healthy exported Service beside the bad input: the specs show that whatever
// the bad input does, the bystander's import in every other member is not written at all.
type bystander struct {
	ns, name string
	states   map[string]importState
}

// newBystander exports ns/name from a with two endpoints and waits until b and c serve it.
func newBystander(ctx context.Context, ns, name string) *bystander {
	GinkgoHelper()
	create(ctx, a, httpService(ns, name).Obj())
	createSlice(ctx, a, ns, name, name+"-a", "10.99.0.1", "10.99.0.2")
	export(ctx, a, ns, name, nil)
	by := &bystander{ns: ns, name: name, states: map[string]importState{}}
	for _, m := range []*member{b, c} {
		Eventually(importedAddresses).WithArguments(ctx, m, ns, name).Should(Equal([]string{"10.99.0.1", "10.99.0.2"}), "in %s", m.Name)
		Eventually(importClusters).WithArguments(ctx, m, ns, name).Should(Equal([]string{"a"}), "in %s", m.Name)
		// The import settles with its status write; take the state once it holds still.
		Eventually(func() bool {
			st := importStateOf(ctx, m, ns, name)
			prev, seen := by.states[m.Name]
			by.states[m.Name] = st
			return seen && reflect.DeepEqual(prev, st)
		}).WithPolling(300*time.Millisecond).Should(BeTrue(), "in %s", m.Name)
	}
	return by
}

// untouched asserts, for a while, that b and c keep serving the bystander exactly as before.
func (by *bystander) untouched(ctx context.Context) {
	GinkgoHelper()
	for _, m := range []*member{b, c} {
		Consistently(importStateOf).WithArguments(ctx, m, by.ns, by.name).WithTimeout(2*time.Second).
			Should(Equal(by.states[m.Name]), "the bystander's import in %s is not written", m.Name)
	}
}

// exportEvents returns "type/reason: note" of every event about the ServiceExport ns/name.
func exportEvents(ctx context.Context, m *member, ns, name string) []string {
	list := &eventsv1.EventList{}
	Expect(m.Client.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "ServiceExport" && e.Regarding.Name == name {
			out = append(out, e.Type+"/"+e.Reason+": "+e.Note)
		}
	}
	return out
}

// exportMessage returns the message of the export's condition t ("" without one).
func exportMessage(ctx context.Context, m *member, ns, name string, t mcsv1beta1.ServiceExportConditionType) string {
	if cond := exportCondition(ctx, m, ns, name, t); cond != nil {
		return cond.Message
	}
	return ""
}

// createSlices stands in for the member's EndpointSlice controller with n endpoints in slices
// of at most perSlice, every one with the given ports, addresses 10.<net>.<i/250>.<i%250+1>.
func createSlices(ctx context.Context, m *member, ns, service string, net, n, perSlice int, ports []discoveryv1.EndpointPort) []string {
	var all []string
	for first := 0; first < n; first += perSlice {
		var ips []string
		for i := first; i < min(first+perSlice, n); i++ {
			ips = append(ips, fmt.Sprintf("10.%d.%d.%d", net, i/250, i%250+1))
		}
		slice := newSlice(m, ns, service, fmt.Sprintf("%s-%d", service, first/perSlice), ips...)
		if ports != nil {
			slice.Ports = ports
		}
		Expect(m.Client.Create(ctx, slice)).To(Succeed())
		all = append(all, ips...)
	}
	slices.Sort(all)
	return all
}

// newSlice is createSlice's object, not yet created.
func newSlice(m *member, ns, service, name string, ips ...string) *discoveryv1.EndpointSlice {
	slice := &discoveryv1.EndpointSlice{}
	slice.Namespace, slice.Name = ns, name
	slice.Labels = map[string]string{
		discoveryv1.LabelServiceName: service,
		discoveryv1.LabelManagedBy:   "endpointslice-controller.fleetslice.io",
	}
	slice.AddressType = discoveryv1.AddressTypeIPv4
	slice.Ports = []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}}
	for i, ip := range ips {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
			NodeName:   ptr.To(fmt.Sprintf("%s-node-%d", m.Name, i%3)),
			Zone:       ptr.To([]string{"zone-a", "zone-b", "zone-c"}[i%3]),
		})
	}
	return slice
}

// timeTo reports, for docs/reliability.md, how long after start cond first held. It measures
// only; nothing asserts on it.
func timeTo(what string, start time.Time) {
	AddReportEntry(what, time.Since(start).Round(time.Millisecond).String())
	GinkgoWriter.Printf("%s after %v\n", what, time.Since(start).Round(time.Millisecond))
}
