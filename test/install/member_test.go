package install_test

import (
	"bytes"
	"context"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
	"github.com/fleetslice/fleetslice/internal/ops/join"
	"github.com/fleetslice/fleetslice/internal/release/image"
	"github.com/fleetslice/fleetslice/internal/release/installer"
)

// zones of every member's Nodes; the agent runs as the first Node's.
var zones = []string{"zone-a", "zone-b", "zone-c"}

// installedMember is one member cluster with fleetslice installed, its manager and agent running
// from their images in a network namespace that sees the member's and the broker's API servers
// at their usual loopback addresses.
type installedMember struct {
	id             string
	env            *testenv.Cluster
	objs           []*unstructured.Unstructured
	ns             *netns.Namespace
	mirrors        []net.Listener
	manager, agent *process
	// serviceIP is the `kubernetes` Service's IP, unreachable in ns.
	serviceIP string
}

type process struct {
	cmd *exec.Cmd
	log *lockedBuffer
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func nodeName(zone string) string { return "node-" + zone }

func (m *installedMember) start(ctx context.Context) {
	for _, zone := range zones {
		createReadyNode(ctx, m.env.Client, nodeName(zone), zone)
	}
	var err error
	m.ns, err = netns.Create("fsinst")
	Expect(err).NotTo(HaveOccurred())
	memberURL, err := url.Parse(m.env.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	brokerURL, err := url.Parse(brokerEnv.Config.Host)
	Expect(err).NotTo(HaveOccurred())
	for _, addr := range []string{memberURL.Host, brokerURL.Host} {
		l, err := m.ns.Mirror(addr)
		Expect(err).NotTo(HaveOccurred())
		m.mirrors = append(m.mirrors, l)
	}
	inCluster := []string{"KUBERNETES_SERVICE_HOST=" + memberURL.Hostname(), "KUBERNETES_SERVICE_PORT=" + memberURL.Port()}

	secret := &corev1.Secret{}
	Expect(m.env.Client.Get(ctx, client.ObjectKey{Namespace: installer.Namespace, Name: join.SecretName}, secret)).To(Succeed())
	managerFS := m.rootFS(ctx, managerRootFS, "fleetslice-controller-manager", map[string][]byte{
		"var/run/fleetslice/broker/kubeconfig": secret.Data[join.SecretKey],
	})
	command := containerCommand(m.objs, "Deployment", installer.ManagerContainer)
	m.manager = m.run(managerFS, image.NonRootUser, inCluster, command)

	// The agent replaces kube-proxy: nothing translates the `kubernetes` Service's IP on its node
	// but the agent itself. The kubelet's variables name that IP; the route to it is unreachable
	// in the namespace, so the agent syncs only through the address its DaemonSet sets.
	kubernetes := &corev1.Service{}
	Expect(m.env.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kubernetes"}, kubernetes)).To(Succeed())
	m.serviceIP = kubernetes.Spec.ClusterIP
	_, err = m.ns.Command("", "ip", "route", "add", "unreachable", m.serviceIP)
	Expect(err).NotTo(HaveOccurred())
	kubeletEnv := []string{"KUBERNETES_SERVICE_HOST=" + m.serviceIP, "KUBERNETES_SERVICE_PORT=443"}

	agentFS := m.rootFS(ctx, agentRootFS, "fleetslice-agent", nil)
	command = containerCommand(m.objs, "DaemonSet", installer.AgentContainer)
	env := append(append([]string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}, kubeletEnv...),
		containerEnv(m.objs, "DaemonSet", installer.AgentContainer, nodeName(zones[0]))...)
	m.agent = m.run(agentFS, "", env, command)
}

// containerEnv is a workload container's env as the kubelet gives it on node: literal values
// and the Node's name, the only field the installed workloads refer to. Later entries win
// when the environment is read, so these override the kubelet's own variables before them.
func containerEnv(objs []*unstructured.Unstructured, kind, container, node string) []string {
	var out []string
	items, _ := installedContainer(objs, kind, container)["env"].([]any)
	for _, item := range items {
		e := item.(map[string]any)
		value, isLiteral := e["value"].(string)
		if !isLiteral {
			field, _, _ := unstructured.NestedString(e, "valueFrom", "fieldRef", "fieldPath")
			Expect(field).To(Equal("spec.nodeName"), "env %v of %s %s", e["name"], kind, container)
			value = node
		}
		out = append(out, e["name"].(string)+"="+value)
	}
	return out
}

// installedContainer is the named container of the installed workload of kind.
func installedContainer(objs []*unstructured.Unstructured, kind, container string) map[string]any {
	for _, obj := range objs {
		if obj.GetKind() != kind {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		Expect(err).NotTo(HaveOccurred())
		for _, c := range containers {
			if cm := c.(map[string]any); cm["name"] == container {
				return cm
			}
		}
	}
	Fail("no " + kind + " container " + container + " in the installed objects")
	return nil
}

// rootFS copies an image's root filesystem and adds what the kubelet would mount: the projected
// ServiceAccount token of serviceAccount, the cluster CA and namespace, and extra files.
func (m *installedMember) rootFS(ctx context.Context, from, serviceAccount string, extra map[string][]byte) string {
	dir := filepath.Join(GinkgoT().TempDir(), "rootfs")
	Expect(exec.Command("cp", "-a", from, dir).Run()).To(Succeed())
	Expect(image.AddDevNull(dir)).To(Succeed())
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: installer.Namespace, Name: serviceAccount}}
	token := &authenticationv1.TokenRequest{}
	Expect(m.env.Client.SubResource("token").Create(ctx, sa, token)).To(Succeed())
	files := map[string][]byte{
		"var/run/secrets/kubernetes.io/serviceaccount/token":     []byte(token.Status.Token),
		"var/run/secrets/kubernetes.io/serviceaccount/ca.crt":    m.env.Config.CAData,
		"var/run/secrets/kubernetes.io/serviceaccount/namespace": []byte(installer.Namespace),
	}
	for k, v := range extra {
		files[k] = v
	}
	for path, content := range files {
		full := filepath.Join(dir, path)
		Expect(os.MkdirAll(filepath.Dir(full), 0o755)).To(Succeed())
		Expect(os.WriteFile(full, content, 0o644)).To(Succeed())
	}
	return dir
}

// run starts command chrooted into rootfs, as user (empty: root), inside the member's namespace.
func (m *installedMember) run(rootfs, user string, env, command []string) *process {
	args := []string{}
	if user != "" {
		args = append(args, "--userspec="+user)
	}
	args = append(append(args, rootfs), command...)
	p := &process{log: &lockedBuffer{}}
	var err error
	m.ns.Do(func() {
		p.cmd = exec.Command("chroot", args...)
		p.cmd.Env = env
		p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
		err = p.cmd.Start()
	})
	Expect(err).NotTo(HaveOccurred())
	return p
}

func (m *installedMember) stop() {
	for _, p := range []*process{m.manager, m.agent} {
		if p != nil && p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}
	for _, l := range m.mirrors {
		_ = l.Close()
	}
	if m.ns != nil {
		Expect(m.ns.Close()).To(Succeed())
	}
}

// containerCommand is a workload container's command and arguments exactly as installed.
func containerCommand(objs []*unstructured.Unstructured, kind, container string) []string {
	cm := installedContainer(objs, kind, container)
	var out []string
	for _, key := range []string{"command", "args"} {
		items, _ := cm[key].([]any)
		for _, item := range items {
			out = append(out, item.(string))
		}
	}
	return out
}

func createReadyNode(ctx context.Context, c client.Client, name, zone string) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: zone}}}
	Expect(c.Create(ctx, node)).To(Succeed())
	node.Status = corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}
	Expect(c.Status().Update(ctx, node)).To(Succeed())
}
