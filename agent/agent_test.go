package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/knftables"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/agent/dataplane"
	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
)

var _ = Describe("the node agent in dry-run mode", func() {
	var (
		ctx    = context.Background()
		ns     string
		node   string
		dr     *dataplane.DryRun
		output string
		a      *runningAgent
	)
	key := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	// createImport creates a ClusterSetIP ServiceImport of one HTTP port with ips.
	createImport := func(name string, ips ...string) *mcsv1beta1.ServiceImport {
		return create(&mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: mcsv1beta1.ServiceImportSpec{
				Type:  mcsv1beta1.ClusterSetIP,
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
				IPs:   ips,
			},
		})
	}
	// clusterIPsOf lists the cluster IPs the agent programs for the Service name.
	clusterIPsOf := func(name string) []string {
		s, ok := a.service(key(name))
		if !ok {
			return nil
		}
		out := []string{}
		for _, ip := range s.ClusterIPs {
			out = append(out, ip.String())
		}
		return out
	}

	BeforeEach(func() {
		ns = newNamespace()
		node = newNode("zone-a")
		dr = dryRun()
		output = filepath.Join(GinkgoT().TempDir(), "ruleset.nft")
		write := agent.RulesetWriter(output, ctrl.Log, dr)
		a = startAgent(node, []agent.Dataplane{dr}, func(o *agent.Options) {
			record := o.OnSync
			o.OnSync = func(r agent.Report) { record(r); write(r) }
		})
		Eventually(a.Ready).Should(Succeed())
	})

	It("honours zone hints for its zone, ignores them when a ready endpoint lacks one, and follows the Node's zone", func() {
		svc := create(builders.MakeService(ns, "web").Port("http", 80, intstr.FromInt32(80)).Obj())
		slice := create(builders.MakeEndpointSlice(ns, "web-1").Service("web").Port("http", 8080).Endpoints(
			endpoint("10.1.0.1", node, "", "zone-a"),
			endpoint("10.1.0.2", "other", "", "zone-b"),
			endpoint("10.1.0.3", "other", "", "zone-a")).Obj())
		Eventually(a.endpointsOf).WithArguments(key("web"), "http").
			Should(Equal([]string{"10.1.0.1:8080*", "10.1.0.3:8080"}))
		By("writing what it programs to the dry-run output")
		Eventually(func() (string, error) {
			b, err := os.ReadFile(output)
			return string(b), err
		}).Should(And(ContainSubstring(ip(svc)+" . tcp . 80"), ContainSubstring("10.1.0.3 . 8080"), Not(ContainSubstring("10.1.0.2"))))
		Expect(dr.Ruleset()).To(ContainSubstring("10.1.0.1 . 8080"))

		By("ignoring every hint once one ready endpoint has none")
		updateSlice(slice, func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, endpoint("10.1.0.4", "other", ""))
		})
		Eventually(a.endpointsOf).WithArguments(key("web"), "http").
			Should(Equal([]string{"10.1.0.1:8080*", "10.1.0.2:8080", "10.1.0.3:8080", "10.1.0.4:8080"}))

		By("choosing the new zone's endpoints when the Node moves to zone-b")
		updateSlice(slice, func(s *discoveryv1.EndpointSlice) { s.Endpoints = s.Endpoints[:3] })
		n := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		n.Labels[agent.ZoneLabel] = "zone-b"
		Expect(k8s.Update(ctx, n)).To(Succeed())
		Eventually(a.endpointsOf).WithArguments(key("web"), "http").Should(Equal([]string{"10.1.0.2:8080"}))
	})

	It("keeps internalTrafficPolicy Local traffic on this node", func() {
		create(builders.MakeService(ns, "local").Port("http", 80, intstr.FromInt32(80)).
			InternalTrafficPolicy(corev1.ServiceInternalTrafficPolicyLocal).Obj())
		create(builders.MakeEndpointSlice(ns, "local-1").Service("local").Port("http", 8080).Endpoints(
			endpoint("10.2.0.1", node, ""), endpoint("10.2.0.2", "other", ""), endpoint("10.2.0.3", node, "s")).Obj())
		Eventually(a.endpointsOf).WithArguments(key("local"), "http").Should(Equal([]string{"10.2.0.1:8080*"}))
	})

	It("falls back to serving terminating endpoints when none is ready", func() {
		create(builders.MakeService(ns, "draining").Port("http", 80, intstr.FromInt32(80)).Obj())
		create(builders.MakeEndpointSlice(ns, "draining-1").Service("draining").Port("http", 8080).Endpoints(
			endpoint("10.3.0.1", "other", "st"), endpoint("10.3.0.2", "other", "t"), endpoint("10.3.0.3", node, "st")).Obj())
		Eventually(a.endpointsOf).WithArguments(key("draining"), "http").
			Should(Equal([]string{"10.3.0.1:8080", "10.3.0.3:8080*"}))
	})

	It("rejects connections to a Service without endpoints and forgets a removed Service", func() {
		svc := create(builders.MakeService(ns, "empty").Port("http", 80, intstr.FromInt32(80)).Obj())
		reject := "add element ip fleetslice no-endpoint-services { " + ip(svc) + " . tcp . 80 comment \"" + ns + "/empty:http\" }"
		Eventually(dr.Ruleset).Should(ContainSubstring(reject))
		Expect(a.endpointsOf(key("empty"), "http")).To(BeEmpty())

		Expect(k8s.Delete(ctx, svc)).To(Succeed())
		// The address alone, not as a prefix: a Service left by another spec may hold 10.0.3.50
		// when this one held 10.0.3.5.
		Eventually(dr.Ruleset).ShouldNot(MatchRegexp(addressPattern(ip(svc))))
		Eventually(func() bool { _, ok := a.service(key("empty")); return ok }).Should(BeFalse())
	})

	It("programs a ServiceImport's IPs on the derived Service and its imported endpoints", func() {
		imp := createImport("db", "10.0.250.1")
		derived := create(builders.MakeService(ns, "derived-db").Port("http", 80, intstr.FromInt32(80)).
			Label(mcsv1beta1.LabelServiceName, "db").
			Owner(metav1.OwnerReference{
				APIVersion: mcsv1beta1.GroupVersion.String(), Kind: mcsv1beta1.ServiceImportKindName,
				Name: imp.Name, UID: imp.UID, Controller: ptr.To(true),
			}).Obj())
		create(builders.MakeImportedSlice(ns, "db-remote", "db", "member-b").DerivedService("derived-db").Port("http", 8080).
			Endpoints(endpoint("10.4.0.1", "", ""), endpoint("10.4.0.2", "", "")).Obj())

		Eventually(clusterIPsOf).WithArguments("derived-db").Should(Equal([]string{ip(derived), "10.0.250.1"}))
		Eventually(a.endpointsOf).WithArguments(key("derived-db"), "http").Should(Equal([]string{"10.4.0.1:8080", "10.4.0.2:8080"}))
		Expect(dr.Ruleset()).To(And(ContainSubstring("10.0.250.1 . tcp . 80"), ContainSubstring(ip(derived)+" . tcp . 80")))

		By("following the ServiceImport when its IPs change")
		imp.Spec.IPs = []string{ip(derived)}
		Expect(k8s.Update(ctx, imp)).To(Succeed())
		Eventually(clusterIPsOf).WithArguments("derived-db").Should(Equal([]string{ip(derived)}))
		Eventually(dr.Ruleset).ShouldNot(ContainSubstring("10.0.250.1"))
	})

	It("binds a derived Service to its ServiceImport by name and label, as the import controller writes it", func() {
		createImport("cache", "10.0.250.2")
		derivedName := names.DerivedServiceName(ns, "cache")
		derived := create(builders.MakeService(ns, derivedName).Port("http", 80, intstr.FromInt32(80)).
			Label(mcsv1beta1.LabelServiceName, "cache").Obj())
		// A user's Service carrying the label under another name must not take the import's IPs.
		impostor := create(builders.MakeService(ns, "cache-lookalike").Port("http", 80, intstr.FromInt32(80)).
			Label(mcsv1beta1.LabelServiceName, "cache").Obj())
		Eventually(clusterIPsOf).WithArguments(derivedName).Should(Equal([]string{ip(derived), "10.0.250.2"}))
		Eventually(clusterIPsOf).WithArguments("cache-lookalike").Should(Equal([]string{ip(impostor)}))
		Consistently(clusterIPsOf).WithArguments("cache-lookalike").WithTimeout(time.Second).Should(Equal([]string{ip(impostor)}))
	})

	It("rewrites only the Service that changed on an incremental sync", func() {
		var slices []*discoveryv1.EndpointSlice
		for i, name := range []string{"s1", "s2", "s3", "s4", "s5"} {
			create(builders.MakeService(ns, name).Port("http", 80, intstr.FromInt32(80)).Obj())
			slices = append(slices, create(builders.MakeEndpointSlice(ns, name+"-1").Service(name).Port("http", 8080).Endpoints(endpoint("10.5.0."+string(rune('1'+i)), "other", "")).Obj()))
		}
		for _, name := range []string{"s1", "s2", "s3", "s4", "s5"} {
			Eventually(a.endpointsOf).WithArguments(key(name), "http").Should(HaveLen(1))
		}
		before := a.count()
		updateSlice(slices[2], func(s *discoveryv1.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, endpoint("10.5.0.9", node, ""))
		})
		Eventually(a.endpointsOf).WithArguments(key("s3"), "http").Should(Equal([]string{"10.5.0.3:8080", "10.5.0.9:8080*"}))
		var applied *agent.Report
		for _, r := range a.since(before) {
			if s, ok := find(r, key("s3")); ok && len(portEndpoints(s, "http")) == 2 && r.Err == nil {
				applied = &r
				break
			}
		}
		Expect(applied).NotTo(BeNil())
		Expect(applied.Full).To(BeFalse())
		Expect(applied.Converted).To(Equal(1), "only the changed Service is converted again")
		Expect(applied.Stats[0].Full).To(BeFalse())
		Expect(applied.Stats[0].Changed).To(Equal(1), "only the changed Service is rewritten")
		Expect(applied.Stats[0].Services).To(BeNumerically(">=", 5))
	})

	It("measures network programming latency from the slices' trigger time and counts syncs", func() {
		for _, name := range []string{
			"fleetslice_agent_sync_proxy_rules_duration_seconds", "fleetslice_agent_sync_full_proxy_rules_duration_seconds",
			"fleetslice_agent_sync_partial_proxy_rules_duration_seconds", "fleetslice_agent_sync_proxy_rules_last_timestamp_seconds",
		} {
			Expect(metricValue(name, nil)).To(BeNumerically(">", 0), name)
		}
		programmed := metricValue("fleetslice_agent_network_programming_duration_seconds", nil)
		partial := metricValue("fleetslice_agent_sync_proxy_rules_total", map[string]string{"mode": "partial", "result": "success"})

		create(builders.MakeService(ns, "timed").Port("http", 80, intstr.FromInt32(80)).Obj())
		s := create(builders.MakeEndpointSlice(ns, "timed-1").Service("timed").Port("http", 8080).Endpoints(endpoint("10.6.0.1", "other", "")).Obj())
		updateSlice(s, func(s *discoveryv1.EndpointSlice) {
			s.Annotations = map[string]string{corev1.EndpointsLastChangeTriggerTime: time.Now().Format(time.RFC3339Nano)}
			s.Endpoints = append(s.Endpoints, endpoint("10.6.0.2", "other", ""))
		})
		Eventually(a.endpointsOf).WithArguments(key("timed"), "http").Should(HaveLen(2))
		Eventually(metricValue).WithArguments("fleetslice_agent_network_programming_duration_seconds", map[string]string(nil)).
			Should(BeNumerically(">", programmed))
		Expect(metricValue("fleetslice_agent_sync_proxy_rules_total", map[string]string{"mode": "partial", "result": "success"})).
			To(BeNumerically(">", partial))
		Expect(metricValue("fleetslice_agent_sync_proxy_rules_endpoint_changes_total", nil)).To(BeNumerically(">", 0))
	})
})

var _ = Describe("the node agent's readiness", func() {
	It("reports unready while the kernel refuses transactions and recovers on a retry", func() {
		ns := newNamespace()
		nft := &flakyNFT{Fake: knftables.NewFake(knftables.IPv4Family, dataplane.TableName)}
		nft.fail.Store(true)
		syncer, err := dataplane.New(nft, dataplane.Options{})
		Expect(err).NotTo(HaveOccurred())
		errorsBefore := metricValue("fleetslice_agent_sync_proxy_rules_total", map[string]string{"result": "error"})
		failuresBefore := metricValue("fleetslice_agent_sync_proxy_rules_nftables_sync_failures_total", nil)

		a := startAgent(newNode("zone-a"), []agent.Dataplane{syncer}, nil)
		svc := create(builders.MakeService(ns, "web").Port("http", 80, intstr.FromInt32(80)).Obj())
		Eventually(a.Ready).Should(MatchError(ContainSubstring("simulated: kernel refused")))
		Consistently(a.Ready, 300*time.Millisecond).ShouldNot(Succeed())
		Expect(metricValue("fleetslice_agent_sync_proxy_rules_total", map[string]string{"result": "error"})).To(BeNumerically(">", errorsBefore))
		Expect(metricValue("fleetslice_agent_sync_proxy_rules_nftables_sync_failures_total", nil)).To(BeNumerically(">", failuresBefore))
		Expect(nft.Dump()).To(BeEmpty(), "nothing is written while the kernel refuses")

		nft.fail.Store(false)
		Eventually(a.Ready).Should(Succeed())
		Expect(nft.Dump()).To(ContainSubstring(ip(svc) + " . tcp . 80"))
	})

	It("retries opening nftables until it is available", func() {
		var opens atomic.Int32
		open := func(f knftables.Family) (knftables.Interface, error) {
			if opens.Add(1) < 3 {
				return nil, os.ErrNotExist
			}
			return knftables.NewFake(f, dataplane.TableName), nil
		}
		a := startAgent(newNode(""), []agent.Dataplane{agent.NewKernelDataplane(dataplane.Options{}, open)}, nil)
		Eventually(a.Ready).Should(MatchError(ContainSubstring("install the nftables package")))
		Eventually(a.Ready).Should(Succeed())
		Expect(opens.Load()).To(BeNumerically(">=", 3))
	})
})

var _ = Describe("the node agent with the RBAC of config/agent", func() {
	It("needs nothing beyond its ClusterRole", func(ctx SpecContext) {
		raw, err := os.ReadFile(filepath.Join("..", "config", "agent", "role.yaml"))
		Expect(err).NotTo(HaveOccurred())
		role := &rbacv1.ClusterRole{}
		Expect(yaml.Unmarshal(raw, role)).To(Succeed())
		role.Name = "agent-under-test"
		Expect(k8s.Create(ctx, role)).To(Succeed())
		ns := newNamespace()
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
		Expect(k8s.Create(ctx, sa)).To(Succeed())
		Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "agent-under-test"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
		})).To(Succeed())

		asAgent := rest.CopyConfig(cluster.Config)
		asAgent.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(ns, sa.Name)}
		dr := dryRun()
		a := startAgentAs(asAgent, newNode("zone-a"), []agent.Dataplane{dr}, nil)
		svc := create(builders.MakeService(ns, "web").Port("http", 80, intstr.FromInt32(80)).Obj())
		create(builders.MakeEndpointSlice(ns, "web-1").Service("web").Port("http", 8080).Endpoints(endpoint("10.7.0.1", "other", "")).Obj())
		Eventually(dr.Ruleset).Should(ContainSubstring(ip(svc) + " . tcp . 80"))
		Expect(a.Ready()).To(Succeed())
	})
})

var _ = Describe("the node agent's sync timing", func() {
	It("makes one sync of a burst of changes", func(ctx SpecContext) {
		ns := newNamespace()
		a := startAgent(newNode("zone-a"), []agent.Dataplane{dryRun()}, func(o *agent.Options) {
			o.MinSyncInterval = time.Second
		})
		Eventually(a.Ready).Should(Succeed())
		before := a.count()
		const burst = 20
		for i := range burst {
			create(builders.MakeService(ns, fmt.Sprintf("burst-%d", i)).Port("http", 80, intstr.FromInt32(80)).Obj())
		}
		Eventually(func() int {
			r, _ := a.last()
			n := 0
			for _, s := range r.Services {
				if s.Namespace == ns {
					n++
				}
			}
			return n
		}).Should(Equal(burst))
		Expect(a.count()-before).To(BeNumerically("<", burst/2), "syncs for %d changes", burst)
	})

	It("repairs drift with a periodic full sync", func(ctx SpecContext) {
		ns := newNamespace()
		fake := knftables.NewFake(knftables.IPv4Family, dataplane.TableName)
		syncer, err := dataplane.New(fake, dataplane.Options{})
		Expect(err).NotTo(HaveOccurred())
		a := startAgent(newNode("zone-a"), []agent.Dataplane{syncer}, func(o *agent.Options) {
			o.SyncPeriod = 500 * time.Millisecond
		})
		svc := create(builders.MakeService(ns, "web").Port("http", 80, intstr.FromInt32(80)).Obj())
		Eventually(fake.Dump).Should(ContainSubstring(ip(svc) + " . tcp . 80"))

		By("someone deleting the table behind the agent's back")
		tx := fake.NewTransaction()
		tx.Delete(&knftables.Table{})
		Expect(fake.Run(ctx, tx)).To(Succeed())
		Expect(fake.Dump()).To(BeEmpty())
		Eventually(fake.Dump).Should(ContainSubstring(ip(svc) + " . tcp . 80"))
		full := 0
		for _, r := range a.since(0) {
			Expect(r.Err).NotTo(HaveOccurred(), "the repair comes from the periodic full sync, not from recovering an error")
			if r.Full {
				full++
			}
		}
		Expect(full).To(BeNumerically(">=", 2), "the first sync and at least one periodic one are full")
	})
})
