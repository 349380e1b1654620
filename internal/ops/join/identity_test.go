package join

import (
	"testing"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func kubeconfigFor(t *testing.T, server, namespace, token string) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["b"] = &clientcmdapi.Cluster{Server: server}
	kc.AuthInfos["m"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["b"] = &clientcmdapi.Context{Cluster: "b", AuthInfo: "m", Namespace: namespace}
	kc.CurrentContext = "b"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSameBroker: only a kubeconfig that reaches the same broker namespace at the same address
// counts as a renewal, which the running manager takes up without a restart.
func TestSameBroker(t *testing.T) {
	old := kubeconfigFor(t, "https://broker:6443", "fleetslice-broker", "old")
	for _, tc := range []struct {
		name    string
		old     []byte
		updated []byte
		want    bool
	}{
		{"first join: no kubeconfig before", nil, old, false},
		{"a new token only", old, kubeconfigFor(t, "https://broker:6443", "fleetslice-broker", "new"), true},
		{"the same kubeconfig", old, old, true},
		{"another address", old, kubeconfigFor(t, "https://broker.example:6443", "fleetslice-broker", "new"), false},
		{"another ClusterSet namespace", old, kubeconfigFor(t, "https://broker:6443", "other", "new"), false},
		{"an unreadable kubeconfig before", []byte("{not yaml"), old, false},
		{"a kubeconfig without its current context before", []byte("apiVersion: v1\nkind: Config\ncurrent-context: gone\n"), old, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := sameBroker(tc.old, tc.updated); got != tc.want {
				t.Fatalf("sameBroker = %v, want %v", got, tc.want)
			}
		})
	}
}
