package faultproxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		want         Request
	}{
		{"POST", "/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices", Request{true, "create", "endpointslices"}},
		{"PUT", "/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-abc", Request{true, "update", "endpointslices"}},
		{"PUT", "/apis/multicluster.x-k8s.io/v1beta1/namespaces/demo/serviceexports/web/status", Request{true, "update", "serviceexports/status"}},
		{"PATCH", "/api/v1/namespaces/demo/services/web", Request{true, "patch", "services"}},
		{"DELETE", "/api/v1/namespaces/demo/pods/web-1", Request{true, "delete", "pods"}},
		{"POST", "/api/v1/namespaces", Request{true, "create", "namespaces"}},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l", Request{true, "update", "leases"}},
		{"POST", "/apis/about.k8s.io/v1alpha1/clusterproperties", Request{true, "create", "clusterproperties"}},
		{"GET", "/api/v1/namespaces/demo/pods", Request{false, "list", "pods"}},
		{"GET", "/api/v1/namespaces/demo/pods/web-1", Request{false, "get", "pods"}},
		{"GET", "/apis/discovery.k8s.io/v1/endpointslices?watch=true", Request{false, "watch", "endpointslices"}},
		{"GET", "/healthz", Request{Verb: "GET"}},
		{"GET", "/apis", Request{Verb: "GET"}},
	} {
		path, query, _ := strings.Cut(tc.path, "?")
		if got := Classify(tc.method, path, query == "watch=true"); got != tc.want {
			t.Errorf("Classify(%s %s) = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

// upstream is a stand-in API server that counts the writes it received.
func upstream(t *testing.T) (*rest.Config, *atomic.Int64) {
	var applied atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			applied.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, &applied
}

func send(t *testing.T, p *Proxy, method, path string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequest(method, p.URL+path, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), nil
}

func TestFailWrites(t *testing.T) {
	cfg, applied := upstream(t)
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	slices := "/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices"

	p.FailWrites(1, 1, Fault{Code: http.StatusConflict})
	code, body, err := send(t, p, "POST", slices)
	if err != nil || code != http.StatusConflict || !strings.Contains(body, `"reason":"Conflict"`) {
		t.Fatalf("a failed write before the server: %d %s %v", code, body, err)
	}
	if applied.Load() != 0 {
		t.Fatalf("a write failed before the server reached it: %d applied", applied.Load())
	}
	if code, _, err := send(t, p, "GET", slices); err != nil || code != http.StatusOK {
		t.Fatalf("reads are never failed: %d %v", code, err)
	}
	if code, _, err := send(t, p, "PUT", "/apis/coordination.k8s.io/v1/namespaces/x/leases/l"); err != nil || code != http.StatusOK {
		t.Fatalf("Leases are never failed: %d %v", code, err)
	}

	p.FailWrites(1, 1, Fault{Code: http.StatusInternalServerError, AfterApply: true})
	code, body, err = send(t, p, "PUT", slices+"/web-abc")
	if err != nil || code != http.StatusInternalServerError || !strings.Contains(body, `"reason":"InternalError"`) {
		t.Fatalf("a failed write after the server: %d %s %v", code, body, err)
	}
	if applied.Load() != 2 { // the lease and this update
		t.Fatalf("a write failed after applying must reach the server: %d applied", applied.Load())
	}

	p.FailWrites(0, 1)
	if code, _, err := send(t, p, "DELETE", slices+"/web-abc"); err != nil || code != http.StatusOK {
		t.Fatalf("share 0 fails nothing: %d %v", code, err)
	}
	got := p.Counts()
	want := Counts{
		{"endpointslices", "create"}: {Total: 1, Failed: 1},
		{"endpointslices", "update"}: {Total: 1, Failed: 1},
		{"endpointslices", "delete"}: {Total: 1},
		{"leases", "update"}:         {Total: 1},
		{"endpointslices", "list"}:   {Total: 1},
	}
	if got.String() != want.String() {
		t.Fatalf("counts: got %s, want %s", got, want)
	}
	if got.Writes("leases") != 3 || got.Failed() != 2 || got.Requests("list") != 1 {
		t.Fatalf("Writes without leases = %d (want 3), Failed = %d (want 2)", got.Writes("leases"), got.Failed())
	}
}

func TestFailWritesShare(t *testing.T) {
	cfg, _ := upstream(t)
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.FailWrites(0.25, 7, Fault{Code: http.StatusConflict}, Fault{Code: http.StatusInternalServerError})
	codes := map[int]int{}
	for range 400 {
		code, _, err := send(t, p, "POST", "/api/v1/namespaces/demo/services")
		if err != nil {
			t.Fatal(err)
		}
		codes[code]++
	}
	failed := codes[http.StatusConflict] + codes[http.StatusInternalServerError]
	// 100 expected; a binomial's 4 standard deviations either side.
	if failed < 65 || failed > 135 || codes[http.StatusConflict] == 0 || codes[http.StatusInternalServerError] == 0 {
		t.Fatalf("a quarter of the writes with both faults expected, got %v", codes)
	}
}

func TestUnreachableUpstream(t *testing.T) {
	cfg, _ := upstream(t)
	p, err := Start(&rest.Config{Host: "https://127.0.0.1:1", TLSClientConfig: cfg.TLSClientConfig})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	code, _, err := send(t, p, "POST", "/api/v1/namespaces/demo/services")
	if err != nil || code != http.StatusBadGateway {
		t.Fatalf("a write to a server that is down: %d %v", code, err)
	}
	got := p.Counts()
	if got.Writes() != 0 || got.Unreachable() != 1 {
		t.Fatalf("a write that never reached the server is no write: %s", got)
	}
}

func TestCutAndRestore(t *testing.T) {
	cfg, _ := upstream(t)
	p, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, _, err := send(t, p, "GET", "/api/v1/pods"); err != nil {
		t.Fatal(err)
	}
	p.Cut()
	if code, _, err := send(t, p, "GET", "/api/v1/pods"); err == nil {
		t.Fatalf("a cut proxy answered %d", code)
	}
	p.Restore()
	if code, _, err := send(t, p, "GET", "/api/v1/pods"); err != nil || code != http.StatusOK {
		t.Fatalf("after Restore: %d %v", code, err)
	}
}
