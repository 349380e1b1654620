package tiers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/controllers/multicluster/names"
	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
	"github.com/fleetslice/fleetslice/internal/lab/netns"
)

// clientNamespace holds each member's client Pod, apart from the web tier's namespace, whose
// Pods the specs count as endpoints.
const clientNamespace = "tiers-clients"

// webScript answers every TCP connection on 8080 with the content of the file $ANSWER,
// "<cluster>/<pod>" (the Pods of every member have the same names, so the answer names the
// cluster the tests count it under). socat's child for a connection only reads the file: no
// program starts per request, which keeps a step's 900 requests to a few seconds on a loaded
// machine (a shell per request, as `SYSTEM:echo` runs, costs three times as much).
const webScript = `exec socat TCP-LISTEN:8080,fork,reuseaddr OPEN:"$ANSWER",rdonly`

// webContainer is the web tier's container for the Pod named pod in member. With the pod network
// it runs as a host program in the Pod's namespace and is ready once it listens, as a real
// Deployment's would be (without a probe a Pod is an endpoint from its start, maybe before its
// listener is bound); without it, kwok marks the Pod ready at once and nothing runs. Its answer
// file is under the ClusterSet's workdir, which the teardown removes.
func webContainer(member, pod string) corev1.Container {
	GinkgoHelper()
	answer := filepath.Join(clusterSet.Workdir, "tiers-answers", member+"-"+pod)
	Expect(os.MkdirAll(filepath.Dir(answer), 0o755)).To(Succeed())
	Expect(os.WriteFile(answer, []byte(member+"/"+pod+"\n"), 0o644)).To(Succeed())
	return corev1.Container{
		Name: "web", Image: "docker.io/alpine/socat:1.8.0.3", Command: []string{"sh", "-c", webScript},
		Env:   []corev1.EnvVar{{Name: "ANSWER", Value: answer}},
		Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1, TimeoutSeconds: 2,
		},
	}
}

// waitProbedReady waits, with the pod network, until every web Pod's readiness probe passed and
// its runtime wrote it Ready. kwok marks a Pod Ready when it places it and the runtime then
// writes it not ready until its listener answers, so before this the first step could see an
// allocation made from kwok's Ready, and requests counted under it could meet the flip (an
// answer from c2 while c1's rules said all at home).
func waitProbedReady(ctx SpecContext, ns string) {
	GinkgoHelper()
	if network == nil {
		return
	}
	for _, m := range clusterSet.Members {
		Eventually(func(g Gomega) {
			names, err := localsettest.PodNames(ctx, clients[m], ns, "web")
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(names).To(HaveLen(3))
			for _, name := range names {
				g.Expect(network.Runtimes[m].ProbedReady(ns, name)).To(BeTrue(), "%s's Pod %s/%s passed its probe", m, ns, name)
			}
		}).WithContext(ctx).Should(Succeed())
	}
	// Ready in the API is not ready in the rules yet: the steps check rules by cluster, which two
	// of a member's three endpoints satisfy as well as three, and the expected load would then
	// count a third endpoint the rules still lack. So each member's dry-run agent must also
	// send to every one of its member's web Pods.
	for m, run := range agents {
		Eventually(func(g Gomega) {
			pods := &corev1.PodList{}
			g.Expect(clients[m].List(ctx, pods, client.InNamespace(ns))).To(Succeed())
			endpoints, err := localsettest.EndpointShares(run.ruleset, ns, names.DerivedServiceName(ns, "web"), "http")
			g.Expect(err).NotTo(HaveOccurred())
			for _, p := range pods.Items {
				g.Expect(endpoints).To(HaveKey(p.Status.PodIP), "%s's agent sends to its Pod %s", m, p.Name)
			}
		}).WithContext(ctx).Should(Succeed())
	}
}

// createClients runs a client Pod in every member that only sleeps (with the pod network,
// requests are sent from its network namespace) and waits until each has an address.
func createClients(ctx SpecContext) {
	GinkgoHelper()
	for _, m := range clusterSet.Members {
		Expect(clients[m].Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clientNamespace}})).To(Succeed())
		Expect(clients[m].Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: clientNamespace, Name: "client", Labels: map[string]string{"app": "client"}},
			Spec: corev1.PodSpec{NodeName: agents[m].node, Containers: []corev1.Container{{
				Name: "client", Image: "docker.io/library/busybox:1.37", Command: []string{"sleep", "infinity"},
			}}},
		})).To(Succeed())
	}
	for _, m := range clusterSet.Members {
		Eventually(func(g Gomega) string {
			pod := &corev1.Pod{}
			g.Expect(clients[m].Get(ctx, client.ObjectKey{Namespace: clientNamespace, Name: "client"}, pod)).To(Succeed())
			return pod.Status.PodIP
		}).WithContext(ctx).ShouldNot(BeEmpty(), "%s's client Pod gets an address", m)
	}
}

// countRequests checks a step's rows on the real data path. For each member it waits until the
// real agent of its Node has programmed its row (by cluster, within 0.5%, as the dry-run agents'
// rules are checked), sends requestsPerMember requests from its client Pod to the web tier's
// ClusterSet IP (the members at once), counts again if the rules moved meanwhile, and checks
// each cluster's count of answers against its share of those rules with countsFit.
func countRequests(ctx SpecContext, ns string, s tierStep) {
	GinkgoHelper()
	members := clusterSet.Members
	ips, addrs, clientNetns := make([]string, len(members)), make([]string, len(members)), make([]string, len(members))
	rules := make([]map[string]float64, len(members))
	for i, m := range members {
		si := &mcsv1beta1.ServiceImport{}
		Expect(clients[m].Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, si)).To(Succeed())
		Expect(si.Spec.IPs).NotTo(BeEmpty(), "%s's ServiceImport has a ClusterSet IP", m)
		ips[i] = si.Spec.IPs[0]
		addrs[i] = net.JoinHostPort(ips[i], "80")
		Eventually(func(g Gomega) {
			sb, ok := network.Runtimes[m].Sandbox(clientNamespace, "client")
			g.Expect(ok).To(BeTrue(), "%s's client Pod runs", m)
			clientNetns[i] = sb.Netns
		}).WithContext(ctx).Should(Succeed())
	}
	awaitRules := func() {
		for i, m := range members {
			node := agents[m].node
			Eventually(func(g Gomega) {
				rules[i] = kernelClusterShares(ctx, g, ns, m, ips[i])
				g.Expect(rules[i]).To(sharesNear(s.want[m], 0.005), "the real agent of %s", node)
			}).WithContext(ctx).Should(Succeed(), "%s", network.Agents[node].Describe(20))
		}
	}
	awaitRules()

	var counts []map[string]int
	var retried []int
	var errs []error
	var took time.Duration
	for attempt := 1; ; attempt++ {
		begin := time.Now()
		var moved string
		counts, retried, errs, moved = askWhileWatching(ctx, ns, clientNetns, addrs, ips, rules)
		took = time.Since(begin)
		if moved == "" {
			break
		}
		// Not the data path's fault: the rules the counts are judged against changed while they
		// were sent (and maybe back, which the check after the requests alone would miss).
		Expect(attempt).To(BeNumerically("<", 3), "the real agents' rules kept moving while requests were counted: %s", moved)
		GinkgoWriter.Printf("%s: rules moved while counting (%s); counting again\n", s.name, moved)
		awaitRules()
	}

	for i, m := range members {
		Expect(errs[i]).NotTo(HaveOccurred(), "requests from %s's client to %s", m, addrs[i])
		Expect(kernelClusterShares(ctx, Default, ns, m, ips[i])).To(Equal(rules[i]),
			"%s's real agent kept its rules while the requests were counted", m)
		byCluster := map[string]int{}
		for answer, k := range counts[i] {
			cluster, _, _ := strings.Cut(answer, "/")
			byCluster[cluster] += k
		}
		GinkgoWriter.Printf("%s: %s's %d requests answered by %s (rules %s, want %s; %d retried)\n", s.name, m,
			requestsPerMember, formatCounts(byCluster), formatShares(rules[i]), formatShares(s.want[m]), retried[i])
		AddReportEntry(fmt.Sprintf("%s: %s's requests", s.name, m), formatCounts(byCluster))
		Expect(countsFit(byCluster, requestsPerMember, rules[i])).To(Succeed(), "%s's requests at %s", m, s.name)
	}
	GinkgoWriter.Printf("%s: %d requests counted in %s\n", s.name, len(members)*requestsPerMember, took.Round(10*time.Millisecond))
}

// askWhileWatching sends every member's requests at once and, until they are answered, reads the
// real agents' rules every 100 ms: moved says how they differed from rules, if they did.
func askWhileWatching(ctx SpecContext, ns string, clientNetns, addrs, ips []string, rules []map[string]float64) (
	counts []map[string]int, retried []int, errs []error, moved string) {
	members := clusterSet.Members
	counts, retried, errs = make([]map[string]int, len(members)), make([]int, len(members)), make([]error, len(members))
	done := make(chan struct{})
	watched := make(chan string, 1)
	go func() {
		var first string
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			for i, m := range members {
				got, err := kernelSharesOf(ctx, ns, m, ips[i])
				if first == "" && err == nil && !maps.Equal(got, rules[i]) {
					first = fmt.Sprintf("%s's were %s", m, formatShares(got))
				}
			}
			select {
			case <-done:
				watched <- first
				return
			case <-tick.C:
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range members {
		wg.Go(func() { counts[i], retried[i], errs[i] = ask(clientNetns[i], addrs[i], requestsPerMember) })
	}
	wg.Wait()
	close(done)
	return counts, retried, errs, <-watched
}

// kernelClusterShares is the share of new connections to ip:80 that the real agent of member's
// Node sends to each cluster, by what it programmed into nftables.
func kernelClusterShares(ctx SpecContext, g Gomega, ns, member, ip string) map[string]float64 {
	shares, err := kernelSharesOf(ctx, ns, member, ip)
	g.Expect(err).NotTo(HaveOccurred())
	return shares
}

func kernelSharesOf(ctx context.Context, ns, member, ip string) (map[string]float64, error) {
	node := network.Network.Node(member, agents[member].node)
	if node == nil {
		return nil, fmt.Errorf("the pod network has no Node %s in %s", agents[member].node, member)
	}
	endpoints, err := localsettest.KernelEndpointShares(ctx, node.Netns, ip, 80)
	if err != nil {
		return nil, err
	}
	clusterOf, err := localsettest.PodClusters(ctx, clients, ns)
	if err != nil {
		return nil, err
	}
	return localsettest.ClusterShares(endpoints, clusterOf), nil
}

// maxRetries bounds the requests of one batch nobody answered, each sent again: an unanswered
// connection is no answer from any cluster and is retried (a loaded machine may drop one), but
// a destination that never answers shows as more than this.
const maxRetries = 3

// ask sends n TCP connections, four at a time, from inside a client Pod's network namespace to
// addr, and counts the answers. It returns how many it retried, and an error once more than
// maxRetries went unanswered. Each of the four senders runs on a thread of its own inside the
// namespace, where the sockets it opens are made.
func ask(clientNetns, addr string, n int) (map[string]int, int, error) {
	var mu sync.Mutex
	counts := map[string]int{}
	var failures []error
	todo := make(chan struct{}, n)
	for range n {
		todo <- struct{}{}
	}
	close(todo)
	send := func() error {
		for range todo {
			for {
				mu.Lock()
				stop := len(failures) > maxRetries
				mu.Unlock()
				if stop {
					return nil
				}
				answer, err := askOnce(addr)
				mu.Lock()
				if err == nil {
					counts[answer]++
				} else {
					failures = append(failures, err)
				}
				mu.Unlock()
				if err == nil {
					break
				}
			}
		}
		return nil
	}
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Go(func() { errs[i] = netns.In(clientNetns, send) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return counts, len(failures), err
	}
	if len(failures) > maxRetries {
		return counts, len(failures), fmt.Errorf("%d requests unanswered: %w", len(failures), errors.Join(failures...))
	}
	return counts, len(failures), nil
}

// askOnce opens one connection, from the namespace of the thread it runs on, and returns the
// answer the server sends before closing it.
func askOnce(addr string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	body, err := io.ReadAll(io.LimitReader(conn, 256))
	if answer := strings.TrimSpace(string(body)); answer != "" {
		return answer, nil
	}
	return "", fmt.Errorf("no answer from %s: %v", addr, err)
}

func formatCounts(counts map[string]int) string {
	total := 0
	for _, k := range counts {
		total += k
	}
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d (%.1f%%)", d, counts[d], 100*float64(counts[d])/float64(total)))
	}
	return strings.Join(parts, ", ")
}

func formatShares(shares map[string]float64) string {
	var parts []string
	for _, d := range destinations(shares, map[string]int{}) {
		parts = append(parts, fmt.Sprintf("%s %.2f%%", d, 100*shares[d]))
	}
	return strings.Join(parts, ", ")
}
