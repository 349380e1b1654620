package datapath

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/localset/localsettest"
)

// echoScript answers every TCP connection on 8080 and every UDP datagram on 8081 with the Pod's
// name: what the tests count answers by. The UDP listener starts first, so that once the TCP
// one answers the readiness probe both are there.
const echoScript = `socat UDP-LISTEN:8081,fork,reuseaddr SYSTEM:'echo $POD_NAME' &
exec socat TCP-LISTEN:8080,fork,reuseaddr SYSTEM:'echo $POD_NAME'`

func memberClient(member string) client.Client {
	GinkgoHelper()
	c, err := clusterSet.Client(member)
	Expect(err).NotTo(HaveOccurred())
	return c
}

func createNamespace(ctx context.Context, member, ns string) {
	GinkgoHelper()
	Expect(client.IgnoreAlreadyExists(memberClient(member).Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
}

// echoDeployment runs replicas Pods answering with their name, labelled app=name.
func echoDeployment(ctx context.Context, member, ns, name string, replicas int32) {
	GinkgoHelper()
	echoDeploymentWith(ctx, member, ns, name, replicas, nil)
}

// echoDeploymentWith is echoDeployment with a change to the Pod template's container.
func echoDeploymentWith(ctx context.Context, member, ns, name string, replicas int32, mod func(*corev1.Container)) {
	GinkgoHelper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{echoContainer()}},
			},
		},
	}
	if mod != nil {
		mod(&d.Spec.Template.Spec.Containers[0])
	}
	Expect(memberClient(member).Create(ctx, d)).To(Succeed())
}

// echoPod runs one Pod answering with its name, from the same template as echoDeployment's.
func echoPod(ctx context.Context, member, ns, name string, labels map[string]string, mod func(*corev1.Pod)) {
	GinkgoHelper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	p.Spec.Containers = []corev1.Container{echoContainer()}
	if mod != nil {
		mod(p)
	}
	Expect(memberClient(member).Create(ctx, p)).To(Succeed())
}

func echoContainer() corev1.Container {
	return corev1.Container{
		Name: "echo", Image: "docker.io/alpine/socat:1.8.0.3",
		Command: []string{"sh", "-c", echoScript},
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		Ports: []corev1.ContainerPort{{Name: "tcp", ContainerPort: 8080}, {Name: "udp", ContainerPort: 8081, Protocol: corev1.ProtocolUDP}},
		// Ready once it listens, as a real Deployment would be: without a probe a Pod is an
		// endpoint from its start, and on a loaded machine its listener may not be bound when
		// the first request reaches it.
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 2, TimeoutSeconds: 2,
		},
	}
}

type servicePort struct {
	name     string
	protocol corev1.Protocol
	port     int32
}

var (
	tcpPort = servicePort{"tcp", corev1.ProtocolTCP, 80}
	udpPort = servicePort{"udp", corev1.ProtocolUDP, 81}
)

// echoService selects app=name with the given ports (TCP to 8080, UDP to 8081).
func echoService(ctx context.Context, member, ns, name string, ports ...servicePort) {
	GinkgoHelper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": name}},
	}
	for _, p := range ports {
		target := intstr.FromInt32(8080)
		if p.protocol == corev1.ProtocolUDP {
			target = intstr.FromInt32(8081)
		}
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.name, Protocol: p.protocol, Port: p.port, TargetPort: target})
	}
	Expect(memberClient(member).Create(ctx, svc)).To(Succeed())
}

func export(ctx context.Context, member, ns, name string, annotations ...string) {
	GinkgoHelper()
	e := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		e.Annotations[annotations[i]] = annotations[i+1]
	}
	Expect(memberClient(member).Create(ctx, e)).To(Succeed())
}

// clientPod runs a Pod that only sleeps: requests run inside its network namespace.
func clientPod(ctx context.Context, member, ns, name string) {
	GinkgoHelper()
	Expect(memberClient(member).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "client", Image: "docker.io/library/busybox:1.37", Command: []string{"sleep", "infinity"},
		}}},
	})).To(Succeed())
}

// podNames lists the names of a member's Pods labelled app=app.
func podNames(ctx context.Context, member, ns, app string) []string {
	GinkgoHelper()
	names, err := localsettest.PodNames(ctx, memberClient(member), ns, app)
	Expect(err).NotTo(HaveOccurred())
	return names
}

// inPod runs a command in a running Pod's network namespace, with its resolver, as its own
// processes run.
func inPod(member, ns, pod string, stdin string, argv ...string) (string, error) {
	rt := network.Runtimes[member]
	sb, ok := rt.Sandbox(ns, pod)
	if !ok {
		return "", fmt.Errorf("pod %s/%s of %s is not running yet", ns, pod, member)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", sb.Netns}, argv...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// request sends one request from a client Pod to host:port and returns the name of the Pod
// that answered.
func request(member, ns, pod string, p servicePort, host string) (string, error) {
	if p.protocol == corev1.ProtocolUDP {
		return requestUDP(member, ns, pod, p, host)
	}
	// The answer ends with the server's close, so wait for it generously.
	out, err := inPod(member, ns, pod, "", "socat", "-t", "5", "-", fmt.Sprintf("TCP:%s:%d,connect-timeout=2", host, p.port))
	if err == nil && out == "" {
		err = fmt.Errorf("no answer from %s over TCP", host)
	}
	return out, err
}

// requestUDP sends a datagram and waits for the answer; as a UDP client does, it sends again,
// waiting longer, when none came. UDP has no end, so socat always waits its whole -t after
// sending: a short first wait keeps the usual request fast, and the later ones cover a server
// that a loaded machine makes slow to fork its answer. A path that drops every datagram still
// fails.
func requestUDP(member, ns, pod string, p servicePort, host string) (string, error) {
	var out string
	var err error
	for _, wait := range []string{"1", "2", "4"} {
		out, err = inPod(member, ns, pod, "ping\n", "socat", "-t", wait, "-", fmt.Sprintf("UDP:%s:%d", host, p.port))
		if err == nil && out != "" {
			return out, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("no answer from %s over UDP in three tries", host)
	}
	return out, err
}

// answers sends n requests and counts them by the Pod that answered; it fails on the first
// request nothing answered.
func answers(member, ns, pod string, p servicePort, host string, n int) (map[string]int, error) {
	counts := map[string]int{}
	for range n {
		who, err := request(member, ns, pod, p, host)
		if err != nil {
			return counts, err
		}
		counts[who]++
	}
	return counts, nil
}
