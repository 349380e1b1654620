package installer

import (
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// The agent replaces kube-proxy, so on a node without kube-proxy nothing translates the
// `kubernetes` Service's IP until the agent has synced, and the agent needs the API server to
// sync. Given the API server's own address, the DaemonSet sets the variables client-go's
// in-cluster configuration reads (a container's own env wins over the ones the kubelet injects),
// as Cilium's k8sServiceHost and k8sServicePort do.
const (
	ServiceHostEnv = "KUBERNETES_SERVICE_HOST"
	ServicePortEnv = "KUBERNETES_SERVICE_PORT"
)

// ParseAPIServer splits host:port ([v6]:port for IPv6) and rejects anything else: a value that
// client-go would turn into a URL nobody listens on must fail at install time, not on the node.
func ParseAPIServer(hostPort string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(hostPort)
	if err != nil {
		return "", "", fmt.Errorf("the agent's API server %q: want host:port: %w", hostPort, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("the agent's API server %q: port %q is not a number from 1 to 65535", hostPort, port)
	}
	if host == "" || strings.ContainsAny(host, "/ ") {
		return "", "", fmt.Errorf("the agent's API server %q: want a host name or address before the port", hostPort)
	}
	return host, port, nil
}

// SetAgentAPIServer points the agent DaemonSet at the API server's address (host:port), replacing
// an address set before.
func SetAgentAPIServer(objs []*unstructured.Unstructured, hostPort string) error {
	host, port, err := ParseAPIServer(hostPort)
	if err != nil {
		return err
	}
	found := 0
	for _, obj := range objs {
		if obj.GetKind() != "DaemonSet" || !hasContainer(obj, AgentContainer) {
			continue
		}
		containers, _, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
		if err != nil {
			return err
		}
		for _, c := range containers {
			if cm, ok := c.(map[string]any); ok && cm["name"] == AgentContainer {
				takeAPIServerEnv(cm)
				env, _ := cm["env"].([]any)
				cm["env"] = append(env,
					map[string]any{"name": ServiceHostEnv, "value": host},
					map[string]any{"name": ServicePortEnv, "value": port})
				found++
			}
		}
		if err := unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers"); err != nil {
			return err
		}
	}
	if found != 1 {
		return fmt.Errorf("found %d DaemonSet containers named %q, want 1", found, AgentContainer)
	}
	return nil
}

// takeAPIServerEnv removes the API server variables from a container's env and returns the
// address they held as host:port ("" when they were not set).
func takeAPIServerEnv(container map[string]any) string {
	env, _ := container["env"].([]any)
	var host, port string
	kept := env[:0:0]
	for _, e := range env {
		em, _ := e.(map[string]any)
		switch em["name"] {
		case ServiceHostEnv:
			host, _ = em["value"].(string)
		case ServicePortEnv:
			port, _ = em["value"].(string)
		default:
			kept = append(kept, e)
		}
	}
	if len(kept) == 0 {
		delete(container, "env")
	} else {
		container["env"] = kept
	}
	if host == "" {
		return ""
	}
	return net.JoinHostPort(host, port)
}

// apiServerSentinel stands for the chart's conditional API server variables in the agent's env.
const apiServerSentinel = "__AGENT_API_SERVER_ENV__"

// chartAPIServer moves the agent container's API server variables into values (agent.apiServer)
// and leaves a sentinel where fillAPIServer puts their template.
func chartAPIServer(container map[string]any, values map[string]any) {
	values["apiServer"] = takeAPIServerEnv(container)
	env, _ := container["env"].([]any)
	container["env"] = append(env, map[string]any{"name": apiServerSentinel})
}

var apiServerLine = regexp.MustCompile(`(?m)^( *)- name: ` + apiServerSentinel + `\n`)

// fillAPIServer renders agent.apiServer as the two variables, and fails the render on a value
// that is not host:port, as ParseAPIServer does for the installer's flag.
func fillAPIServer(text string) string {
	return apiServerLine.ReplaceAllStringFunc(text, func(line string) string {
		indent := apiServerLine.FindStringSubmatch(line)[1]
		return "{{- with .Values.agent.apiServer }}\n" +
			"{{- if not (regexMatch `^(\\[[0-9A-Fa-f:.]+\\]|[^:\\[\\]/ ]+):[0-9]{1,5}$` .) }}\n" +
			"{{- fail (printf \"agent.apiServer must be host:port ([v6]:port for IPv6), not %q\" .) }}\n" +
			"{{- end }}\n" +
			indent + "- name: " + ServiceHostEnv + "\n" +
			indent + "  value: {{ regexReplaceAll `:[0-9]+$` . \"\" | trimPrefix \"[\" | trimSuffix \"]\" | quote }}\n" +
			indent + "- name: " + ServicePortEnv + "\n" +
			indent + "  value: {{ regexFind `[0-9]+$` . | quote }}\n" +
			"{{- end }}\n"
	})
}
