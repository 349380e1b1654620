package multicluster_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/controllers/multicluster/liveness"
)

// exportEverywhere exports ns/web from every member, each with one endpoint 10.<i>.0.1.
func exportEverywhere(ctx SpecContext, ns string) {
	for i, m := range members {
		create(ctx, m, httpService(ns, "web").Obj())
		createSlice(ctx, m, ns, "web", "web-"+m.Name, fmt.Sprintf("10.%d.0.1", i+1))
		export(ctx, m, ns, "web", nil)
	}
	for _, m := range members {
		Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
		Eventually(importedFrom).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
	}
}

func restoreAll() {
	for _, m := range members {
		Expect(m.RestoreBroker()).To(Succeed())
	}
}

var _ = Describe("lost clusters and broker outages", Ordered, func() {
	It("withdraws a lost cluster's endpoints within one lease period and restores them when it renews", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		exportEverywhere(ctx, ns)

		Expect(c.CutBroker()).To(Succeed())
		DeferCleanup(c.RestoreBroker)
		Eventually(func(g Gomega) {
			for _, m := range []*member{a, b} {
				g.Expect(importClusters(ctx, m, ns, "web")).To(Equal([]string{"a", "b"}), "in %s", m.Name)
				g.Expect(importedFrom(ctx, m, ns, "web")).To(Equal([]string{"a", "b"}), "in %s", m.Name)
			}
		}).WithTimeout(4 * leaseDuration).Should(Succeed())
		withdrawnAt := time.Now()

		lease := &coordinationv1.Lease{}
		Expect(clusterSet.Broker.Client.Get(ctx, client.ObjectKey{Namespace: brokerNamespace, Name: liveness.LeaseName("c")}, lease)).To(Succeed())
		expiry := lease.Spec.RenewTime.Add(time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second)
		took := withdrawnAt.Sub(expiry)
		AddReportEntry("lease expiry to withdrawal in both peers", took.String())
		GinkgoWriter.Printf("c's lease expired at %s; its endpoints were gone from a and b %s later\n", expiry.Format(time.StampMilli), took)
		Expect(took).To(BeNumerically("<", leaseDuration), "withdrawal within one lease period of expiry")

		By("c, cut off from the broker, keeps its last known imports")
		Consistently(func(g Gomega) {
			g.Expect(importClusters(ctx, c, ns, "web")).To(Equal([]string{"a", "b", "c"}))
			g.Expect(importedFrom(ctx, c, ns, "web")).To(Equal([]string{"a", "b", "c"}))
		}).WithTimeout(leaseDuration).Should(Succeed())

		By("a and b do not flap while c stays away")
		Consistently(importClusters).WithArguments(ctx, a, ns, "web").WithTimeout(leaseDuration).Should(Equal([]string{"a", "b"}))

		Expect(c.RestoreBroker()).To(Succeed())
		returnedAt := time.Now()
		for _, m := range []*member{a, b} {
			Eventually(importedFrom).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
			Eventually(importClusters).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
		}
		GinkgoWriter.Printf("c's endpoints were back in a and b %s after its connection returned\n", time.Since(returnedAt))
		Consistently(importClusters).WithArguments(ctx, c, ns, "web").WithTimeout(leaseDuration).Should(Equal([]string{"a", "b", "c"}),
			"c must not drop its peers right after reconnecting")
	})

	It("keeps the last known imports through a broker outage and catches up when it ends", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		exportEverywhere(ctx, ns)

		for _, m := range members {
			Expect(m.CutBroker()).To(Succeed())
		}
		DeferCleanup(restoreAll)

		By("changing a's endpoints while nobody reaches the broker")
		slice := &discoveryv1.EndpointSlice{}
		Expect(a.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-a"}, slice)).To(Succeed())
		slice.Endpoints[0].Addresses = []string{"10.1.0.9"}
		Expect(a.Client.Update(ctx, slice)).To(Succeed())
		Eventually(importedAddresses).WithArguments(ctx, a, ns, "web").Should(ContainElement("10.1.0.9"),
			"a's own endpoints reach its own import without the broker")

		Consistently(func(g Gomega) {
			for _, m := range members {
				g.Expect(importClusters(ctx, m, ns, "web")).To(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
				g.Expect(importedFrom(ctx, m, ns, "web")).To(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
			}
		}).WithTimeout(2 * leaseDuration).Should(Succeed())

		restoreAll()
		restoredAt := time.Now()
		for _, m := range []*member{b, c} {
			Eventually(importedAddresses).WithArguments(ctx, m, ns, "web").WithTimeout(60*time.Second).
				Should(ContainElement("10.1.0.9"), "in %s", m.Name)
		}
		GinkgoWriter.Printf("a's change made during the outage reached b and c %s after the broker returned\n", time.Since(restoredAt))
		Consistently(func(g Gomega) {
			for _, m := range members {
				g.Expect(importClusters(ctx, m, ns, "web")).To(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
			}
		}).WithTimeout(leaseDuration).Should(Succeed(), "nobody drops a peer after the outage")
	})

	It("drops a member that leaves cleanly at once, and takes it back when it rejoins", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		exportEverywhere(ctx, ns)

		Expect(c.StopControllers()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			// Whatever happens here, the next specs need c back.
			if !c.Running() {
				Expect(c.StartControllers(ctx)).To(Succeed())
			}
		})
		restarted := time.Now()
		Expect(c.StartControllers(ctx, leaveOnShutdown)).To(Succeed())
		Eventually(func(g Gomega) {
			lease := &coordinationv1.Lease{}
			g.Expect(clusterSet.Broker.Client.Get(ctx, client.ObjectKey{Namespace: brokerNamespace, Name: liveness.LeaseName("c")}, lease)).To(Succeed())
			g.Expect(lease.Spec.RenewTime.After(restarted)).To(BeTrue(), "the restarted manager renews")
		}).Should(Succeed())

		Expect(c.StopControllers()).To(Succeed())
		leftAt := time.Now()
		for _, m := range []*member{a, b} {
			Eventually(importedFrom).WithArguments(ctx, m, ns, "web").WithTimeout(leaseDuration).
				Should(Equal([]string{"a", "b"}), "in %s", m.Name)
		}
		GinkgoWriter.Printf("c's endpoints were gone from a and b %s after it left\n", time.Since(leftAt))
		lease := &coordinationv1.Lease{}
		err := clusterSet.Broker.Client.Get(ctx, client.ObjectKey{Namespace: brokerNamespace, Name: liveness.LeaseName("c")}, lease)
		Expect(client.IgnoreNotFound(err)).To(Succeed())
		Expect(err).To(HaveOccurred(), "a member that leaves deletes its Lease")

		Expect(c.StopControllers()).To(Succeed())
		Expect(c.StartControllers(ctx)).To(Succeed())
		for _, m := range members {
			Eventually(importedFrom).WithArguments(ctx, m, ns, "web").Should(Equal([]string{"a", "b", "c"}), "in %s", m.Name)
		}
	})
})
