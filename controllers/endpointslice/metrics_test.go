package endpointslice_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// metricValue sums a metric's samples: counter and gauge values, histogram sample counts.
func metricValue(g Gomega, name string, labels map[string]string) (float64, bool) {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range f.GetMetric() {
			if !hasLabels(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.Counter.GetValue()
			case m.Gauge != nil:
				total += m.Gauge.GetValue()
			case m.Histogram != nil:
				total += float64(m.Histogram.GetSampleCount())
			}
		}
		return total, true
	}
	return 0, false
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	for k, v := range want {
		found := false
		for _, l := range m.GetLabel() {
			found = found || (l.GetName() == k && l.GetValue() == v)
		}
		if !found {
			return false
		}
	}
	return true
}

var _ = Describe("metrics", func() {
	It("publishes upstream's EndpointSlice controller metrics under fleetslice_endpointslice_", func(ctx SpecContext) {
		ensureNodes(ctx)
		ns := newNamespace(ctx)
		creates := func(g Gomega) float64 {
			v, _ := metricValue(g, "fleetslice_endpointslice_changes", map[string]string{"operation": "create"})
			return v
		}
		before := creates(Default)
		createService(ctx, ns, "metered")
		createPods(ctx, ns, "metered", 30, 0, 7)
		Eventually(func(g Gomega) {
			g.Expect(addressesOf(ourSlices(ctx, g, ns, "metered"))).To(HaveLen(7))
			g.Expect(creates(g)).To(BeNumerically(">", before))
			for _, name := range []string{"endpoints_added_per_sync", "endpoints_removed_per_sync", "endpointslices_changed_per_sync",
				"endpoints_desired", "num_endpoint_slices", "desired_endpoint_slices", "syncs", "services"} {
				_, ok := metricValue(g, "fleetslice_endpointslice_"+name, nil)
				g.Expect(ok).To(BeTrue(), "metric %s registered", name)
			}
			desired, _ := metricValue(g, "fleetslice_endpointslice_endpoints_desired", nil)
			g.Expect(desired).To(BeNumerically(">=", 7))
			ok, _ := metricValue(g, "fleetslice_endpointslice_syncs", map[string]string{"result": "success"})
			g.Expect(ok).To(BeNumerically(">", 0))
		}).Should(Succeed())
	})
})
