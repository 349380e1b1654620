package installer

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fleetslice/fleetslice/internal/lab/k8sbin"
)

func TestParseAPIServer(t *testing.T) {
	for _, tc := range []struct {
		in, host, port string
		ok             bool
	}{
		{in: "10.0.0.1:6443", host: "10.0.0.1", port: "6443", ok: true},
		{in: "api.example.com:443", host: "api.example.com", port: "443", ok: true},
		{in: "[fd00::1]:6443", host: "fd00::1", port: "6443", ok: true},
		{in: "10.0.0.1"},
		{in: "fd00::1:6443"},
		{in: ":6443"},
		{in: "10.0.0.1:0"},
		{in: "10.0.0.1:65536"},
		{in: "10.0.0.1:https"},
		{in: "https://10.0.0.1:6443"},
		{in: ""},
	} {
		host, port, err := ParseAPIServer(tc.in)
		if (err == nil) != tc.ok || host != tc.host || port != tc.port {
			t.Errorf("ParseAPIServer(%q) = %q, %q, %v; want %q, %q, ok=%v", tc.in, host, port, err, tc.host, tc.port, tc.ok)
		}
	}
}

// agentEnv is the agent container's env of the one agent DaemonSet in objs, by name.
func agentEnv(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	env := map[string]any{}
	for _, obj := range objs {
		if obj.GetKind() != "DaemonSet" || !hasContainer(obj, AgentContainer) {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			cm := c.(map[string]any)
			if cm["name"] != AgentContainer {
				continue
			}
			list, _ := cm["env"].([]any)
			for _, e := range list {
				em := e.(map[string]any)
				env[em["name"].(string)] = em["value"]
			}
		}
		return env
	}
	t.Fatal("no agent DaemonSet")
	return nil
}

func readInstallYAML(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "dist/install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func TestSetAgentAPIServer(t *testing.T) {
	objs := readInstallYAML(t)
	if env := agentEnv(t, objs); env[ServiceHostEnv] != nil || env[ServicePortEnv] != nil {
		t.Fatalf("dist/install.yaml already sets the API server: %v", env)
	}
	if err := SetAgentAPIServer(objs, "10.0.0.1:6443"); err != nil {
		t.Fatal(err)
	}
	// Set twice, the last address wins and no variable repeats.
	if err := SetAgentAPIServer(objs, "[fd00::1]:443"); err != nil {
		t.Fatal(err)
	}
	env := agentEnv(t, objs)
	if env[ServiceHostEnv] != "fd00::1" || env[ServicePortEnv] != "443" || len(env) != 3 {
		t.Fatalf("agent env %v, want NODE_NAME and the API server fd00::1, 443", env)
	}
	if err := SetAgentAPIServer(objs, "10.0.0.1"); err == nil {
		t.Fatal("an address without a port was accepted")
	}
}

// TestChartSetsAgentAPIServer renders dist/chart with agent.apiServer set and checks the
// DaemonSet is install.yaml's with SetAgentAPIServer applied, as `installer --agent-api-server`
// writes it; a value that is not host:port fails the render.
func TestChartSetsAgentAPIServer(t *testing.T) {
	helm, err := k8sbin.Path(k8sbin.Helm)
	if err != nil {
		t.Fatal(err)
	}
	render := func(value string) ([]*unstructured.Unstructured, error) {
		out, err := exec.Command(helm, "template", "fleetslice", filepath.Join(repoRoot(t), "dist/chart"),
			"--namespace", Namespace, "--set-string", "agent.apiServer="+value).CombinedOutput()
		if err != nil {
			return nil, &renderError{string(out)}
		}
		return Decode(out)
	}
	for _, addr := range []string{"10.0.0.1:6443", "[fd00::1]:443", "api.example.com:443"} {
		rendered, err := render(addr)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		want := readInstallYAML(t)
		if err := SetAgentAPIServer(want, addr); err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(daemonSet(t, want).Object, daemonSet(t, rendered).Object) {
			t.Errorf("%s: the chart's agent DaemonSet differs from install.yaml's with the same address: env %v, want %v",
				addr, agentEnv(t, rendered), agentEnv(t, want))
		}
	}
	for _, bad := range []string{"10.0.0.1", "https://10.0.0.1:6443", "fd00::1:6443"} {
		if _, err := render(bad); err == nil || !strings.Contains(err.Error(), "agent.apiServer must be host:port") {
			t.Errorf("agent.apiServer=%s: want the render to fail saying host:port, got %v", bad, err)
		}
	}
}

type renderError struct{ out string }

func (e *renderError) Error() string { return "helm template: " + e.out }

func daemonSet(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, obj := range objs {
		if obj.GetKind() == "DaemonSet" && hasContainer(obj, AgentContainer) {
			return obj
		}
	}
	t.Fatal("no agent DaemonSet")
	return nil
}
