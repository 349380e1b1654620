package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/api/allocation"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
	"github.com/fleetslice/fleetslice/internal/lab/builders"
	"github.com/fleetslice/fleetslice/internal/ops/crds"
)

// The agent learns its cluster id as the manager does: the ClusterProperty
// cluster.clusterset.k8s.io, else --cluster-id. The specs are ordered: the
// first ones run before the ClusterProperty CRD exists in this control plane.
var _ = Describe("the node agent's cluster id", Ordered, func() {
	var ns string
	// A derived Service whose allocation keeps east's traffic in east and west's in west,
	// with one imported endpoint from each: the endpoint an agent programs names its cluster.
	const eastEndpoint, westEndpoint = "10.5.0.1:8080", "10.6.0.1:8080"
	derivedKey := func() client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: "derived-web"} }

	BeforeAll(func(ctx SpecContext) {
		ns = newNamespace()
		imp := &mcsv1beta1.ServiceImport{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: mcsv1beta1.ServiceImportSpec{Type: mcsv1beta1.ClusterSetIP,
				Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}},
		}
		Expect(k8s.Create(ctx, imp)).To(Succeed())
		local := allocation.Allocation{Mode: "Local", Clusters: []allocation.Cluster{{Cluster: "east", Local: 1}, {Cluster: "west", Local: 1}}}
		create(builders.MakeService(ns, "derived-web").Port("http", 80, intstr.FromInt32(80)).
			Label(mcsv1beta1.LabelServiceName, "web").
			Annotation(allocation.Annotation, local.String()).
			Owner(metav1.OwnerReference{APIVersion: mcsv1beta1.GroupVersion.String(), Kind: mcsv1beta1.ServiceImportKindName,
				Name: imp.Name, UID: imp.UID, Controller: ptr.To(true)}).Obj())
		for cluster, addr := range map[string]string{"east": "10.5.0.1", "west": "10.6.0.1"} {
			create(builders.MakeImportedSlice(ns, "web-"+cluster, "web", cluster).DerivedService("derived-web").Port("http", 8080).
				Endpoints(endpoint(addr, "", "")).Obj())
		}
	})

	start := func(cfg *rest.Config, configured string, reader client.Reader) (*runningAgent, *logLines) {
		GinkgoHelper()
		lines := &logLines{}
		a := startAgentAs(cfg, newNode("zone-a"), []agent.Dataplane{dryRun()}, func(o *agent.Options) {
			o.ClusterID, o.APIReader, o.Log = configured, reader, lines.logger()
		})
		return a, lines
	}

	It("falls back to --cluster-id without the ClusterProperty CRD, and spreads without either", func(ctx SpecContext) {
		a, lines := start(cluster.Config, "east", k8s)
		Eventually(a.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{eastEndpoint}))
		Expect(a.ClusterIdentity()).To(Equal(agent.ClusterIdentity{ID: "east", Source: agent.FromOptions}))
		Expect(lines.matching("cluster id from the configured --cluster-id")).To(ContainElement(ContainSubstring("CRD (about.k8s.io) is not installed")))

		none, noneLines := start(cluster.Config, "", nil)
		Eventually(none.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{eastEndpoint, westEndpoint}))
		Expect(none.ClusterIdentity().Source).To(Equal(agent.NoClusterID))
		Expect(noneLines.matching("no cluster id")).To(HaveLen(1))
	})

	It("falls back to --cluster-id when the CRD exists but the ClusterProperty does not", func(ctx SpecContext) {
		defs, err := crds.ClusterProperty()
		Expect(err).NotTo(HaveOccurred())
		Expect(crds.Install(ctx, k8s, defs)).To(Succeed())
		// Discovery can lag a moment behind an Established CRD: a fresh client sees it.
		Eventually(func() error { _, err := clusterid.Read(ctx, freshClient()); return err }).Should(Succeed())

		a, lines := start(cluster.Config, "east", freshClient())
		Eventually(a.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{eastEndpoint}))
		Expect(a.ClusterIdentity()).To(Equal(agent.ClusterIdentity{ID: "east", Source: agent.FromOptions}))
		Expect(lines.matching("cluster id from the configured --cluster-id")).To(HaveLen(1))

		By("following a ClusterProperty created while it runs, and its deletion")
		setProperty(ctx, "west")
		Eventually(a.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{westEndpoint}))
		Expect(a.ClusterIdentity().Source).To(Equal(agent.FromClusterProperty))
		Expect(lines.matching("differs from ClusterProperty")).To(HaveLen(1))
		deleteProperty(ctx)
		Eventually(a.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{eastEndpoint}))
	})

	It("takes the ClusterProperty without any flag, with exactly the RBAC of config/agent", func(ctx SpecContext) {
		setProperty(ctx, "west")
		DeferCleanup(deleteProperty)
		asAgent := impersonateAgent(ctx, "agent-clusterid", nil)
		a, lines := start(asAgent, "", readerFor(asAgent))
		Eventually(a.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{westEndpoint}))
		Expect(a.ClusterIdentity()).To(Equal(agent.ClusterIdentity{ID: "west", Source: agent.FromClusterProperty}))
		Expect(lines.matching("cluster id from ClusterProperty cluster.clusterset.k8s.io")).To(HaveLen(1))
	})

	It("still programs, from --cluster-id, when its RBAC does not cover ClusterProperties", func(ctx SpecContext) {
		setProperty(ctx, "west")
		DeferCleanup(deleteProperty)
		asAgent := impersonateAgent(ctx, "agent-clusterid-old-rbac", func(r *rbacv1.ClusterRole) {
			r.Rules = slices.DeleteFunc(r.Rules, func(rule rbacv1.PolicyRule) bool { return rule.APIGroups[0] == clusterid.GroupVersionKind.Group })
		})
		a, lines := start(asAgent, "east", readerFor(asAgent))
		Eventually(a.endpointsOf).WithArguments(derivedKey(), "http").Should(Equal([]string{eastEndpoint}))
		Expect(a.Ready()).To(Succeed())
		Expect(lines.matching("cluster id from the configured --cluster-id")).To(ContainElement(ContainSubstring("grant get, list and watch on clusterproperties.about.k8s.io")))
	})
})

func freshClient() client.Client {
	GinkgoHelper()
	c, err := client.New(cluster.Config, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func readerFor(cfg *rest.Config) client.Reader {
	GinkgoHelper()
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func setProperty(ctx context.Context, value string) {
	GinkgoHelper()
	Expect(clusterid.Ensure(ctx, freshClient(), value)).To(Succeed())
}

func deleteProperty(ctx context.Context) {
	GinkgoHelper()
	p := &unstructured.Unstructured{}
	p.SetGroupVersionKind(clusterid.GroupVersionKind)
	p.SetName(clusterid.PropertyName)
	Expect(client.IgnoreNotFound(freshClient().Delete(ctx, p))).To(Succeed())
	Eventually(func() (string, error) { return clusterid.Read(ctx, freshClient()) }).Should(BeEmpty())
}

// impersonateAgent binds config/agent's ClusterRole (changed by mod) to a new ServiceAccount
// and returns a configuration that acts as it.
func impersonateAgent(ctx context.Context, name string, mod func(*rbacv1.ClusterRole)) *rest.Config {
	GinkgoHelper()
	raw, err := os.ReadFile(filepath.Join("..", "config", "agent", "role.yaml"))
	Expect(err).NotTo(HaveOccurred())
	role := &rbacv1.ClusterRole{}
	Expect(yaml.Unmarshal(raw, role)).To(Succeed())
	role.Name = name
	if mod != nil {
		mod(role)
	}
	Expect(k8s.Create(ctx, role)).To(Succeed())
	ns := newNamespace()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"}}
	Expect(k8s.Create(ctx, sa)).To(Succeed())
	Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}},
	})).To(Succeed())
	cfg := rest.CopyConfig(cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: serviceaccount.MakeUsername(ns, sa.Name)}
	return cfg
}

// logLines collects what a logger wrote, one line per call, for specs that check what the
// agent says.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
		GinkgoWriter.Println(prefix, args)
	}, funcr.Options{})
}

func (l *logLines) matching(substr string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			out = append(out, line)
		}
	}
	return out
}
