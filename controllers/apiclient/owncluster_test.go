package apiclient

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Go's transport asks for gzip on its own; a client of the process's own cluster must not.
func TestOwnClusterClientsAskForUncompressedResponses(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"major":"1","minor":"37"}`))
	}))
	defer srv.Close()
	version := func(cfg *rest.Config) string {
		t.Helper()
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cs.Discovery().ServerVersion(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return asked[len(asked)-1]
	}
	// TLS, as every API server serves: client-go hands a plain-HTTP config Go's default
	// transport, which asks for gzip whatever the config says.
	tls := rest.TLSClientConfig{Insecure: true}
	if got := version(&rest.Config{Host: srv.URL, TLSClientConfig: tls}); got != "gzip" {
		t.Fatalf("a default client asked for %q; the test no longer sees what it guards against", got)
	}
	cfg := &rest.Config{Host: srv.URL, TLSClientConfig: tls}
	ForOwnCluster(cfg)
	if got := version(cfg); got != "" {
		t.Fatalf("a client of the own cluster asked for Accept-Encoding %q, want none", got)
	}
}
