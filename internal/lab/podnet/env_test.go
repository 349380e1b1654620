package podnet

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "POD": "web-0"}
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "1"},
		{"x-$(POD)-y", "x-web-0-y"},
		{"$(MISSING)", "$(MISSING)"},
		{"$$(A)", "$(A)"},
		{"$$$(A)", "$1"},
		{"cost $5", "cost $5"},
		{"tail $", "tail $"},
		{"$(unclosed", "$(unclosed"},
		{"$(A)$(A)", "11"},
	} {
		if got := expand(tc.in, vars); got != tc.want {
			t.Errorf("expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSpecForGivesTheKubeletsEnvironment(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: "demo", UID: "u1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "cluster-1-zone-a-0"},
		Status:     corev1.PodStatus{PodIP: "10.1.0.5", PodIPs: []corev1.PodIP{{IP: "10.1.0.5"}, {IP: "fd00::5"}}},
	}
	field := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	c := &corev1.Container{
		Name:    "web",
		Command: []string{"sh", "-c"},
		Args:    []string{"echo $(GREETING) from $(POD_NAME) on $$(NODE)"},
		Env: []corev1.EnvVar{
			{Name: "GREETING", Value: "hello"},
			field("POD_NAME", "metadata.name"), field("POD_NAMESPACE", "metadata.namespace"),
			field("NODE_NAME", "spec.nodeName"), field("POD_IP", "status.podIP"), field("POD_IPS", "status.podIPs"),
			field("APP", "metadata.labels['app']"),
			{Name: "REF", Value: "$(POD_NAME).$(POD_NAMESPACE)"},
			field("BAD", "status.nothing"),
			{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{Key: "k"}}},
		},
	}
	spec := specFor(pod, c, "/usr/bin:/bin")
	wantEnv := []string{"PATH=/usr/bin:/bin", "HOSTNAME=web-0", "GREETING=hello", "POD_NAME=web-0", "POD_NAMESPACE=demo",
		"NODE_NAME=cluster-1-zone-a-0", "POD_IP=10.1.0.5", "POD_IPS=10.1.0.5,fd00::5", "APP=web", "REF=web-0.demo"}
	if !slices.Equal(spec.Env, wantEnv) {
		t.Errorf("env = %q, want %q", spec.Env, wantEnv)
	}
	wantArgv := []string{"sh", "-c", "echo hello from web-0 on $(NODE)"}
	if !slices.Equal(spec.Argv, wantArgv) {
		t.Errorf("argv = %q, want %q", spec.Argv, wantArgv)
	}
	if len(spec.Problems) != 2 {
		t.Errorf("problems = %q, want the unknown fieldRef and the Secret", spec.Problems)
	}
}

func TestLastLines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc\n"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc\n", 5, "a\nb\nc\n"},
		{"a\nb\nc\n", 0, ""},
		{"", 3, ""},
		{"only\n", 1, "only\n"},
	} {
		if got := string(lastLines([]byte(tc.in), tc.n)); got != tc.want {
			t.Errorf("lastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
