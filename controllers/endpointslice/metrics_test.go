package endpointslice_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetslice/fleetslice/internal/lab/testutil"
)

// metricValue reads a metric from controller-runtime's registry.
func metricValue(g Gomega, name string, labels map[string]string) (float64, bool) {
	v, ok, err := testutil.MetricValue(name, labels)
	g.Expect(err).NotTo(HaveOccurred())
	return v, ok
}

var _ = Describe("metrics", func() {
	It("publishes upstream's EndpointSlice controller metrics under fleetslice_endpointslice_", func(ctx SpecContext) {
		ensureNodes(ctx)
		ns := newNamespace(ctx)
		creates := func(g Gomega) float64 {
			v, _ := metricValue(g, "fleetslice_endpointslice_changes_total", map[string]string{"operation": "create"})
			return v
		}
		before := creates(Default)
		create(ctx, httpService(ns, "metered").Obj())
		createPods(ctx, ns, "metered", 30, 0, 7)
		Eventually(func(g Gomega) {
			g.Expect(addressesOf(ourSlices(ctx, g, ns, "metered"))).To(HaveLen(7))
			g.Expect(creates(g)).To(BeNumerically(">", before))
			for _, name := range []string{"endpoints_added_per_sync", "endpoints_removed_per_sync", "endpointslices_changed_per_sync",
				"endpoints_desired", "num_endpoint_slices", "desired_endpoint_slices", "syncs_total", "services"} {
				_, ok := metricValue(g, "fleetslice_endpointslice_"+name, nil)
				g.Expect(ok).To(BeTrue(), "metric %s registered", name)
			}
			desired, _ := metricValue(g, "fleetslice_endpointslice_endpoints_desired", nil)
			g.Expect(desired).To(BeNumerically(">=", 7))
			ok, _ := metricValue(g, "fleetslice_endpointslice_syncs_total", map[string]string{"result": "success"})
			g.Expect(ok).To(BeNumerically(">", 0))
		}).Should(Succeed())
	})
})
