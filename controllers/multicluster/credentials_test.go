package multicluster

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fleetslice/fleetslice/controllers/multicluster/brokercreds"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
)

func testToken(name string, exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(fmt.Sprintf(`{"sub":%q,"exp":%d}`, name, exp.Unix()))) + ".sig"
}

// writeKubeconfig points at a TLS server: client-go sends credentials only over TLS.
func writeKubeconfig(t *testing.T, path string, server *httptest.Server, token string) {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	kc.Clusters["broker"] = &clientcmdapi.Cluster{Server: server.URL, CertificateAuthorityData: ca}
	kc.AuthInfos["member"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["broker"] = &clientcmdapi.Context{Cluster: "broker", AuthInfo: "member"}
	kc.CurrentContext = "broker"
	// Written beside and renamed, as the kubelet swaps a mounted Secret's files.
	tmp := path + ".tmp"
	if err := clientcmd.WriteToFile(*kc, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialsWatcher follows one member's broker token through its life: a token inside
// the warning period warns, the kubeconfig file rewritten with a renewed token is taken up by
// requests without a new client, the metric follows, and a broken rewrite keeps the token in use.
func TestCredentialsWatcher(t *testing.T) {
	var mu sync.Mutex
	var seenAuth string
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seenAuth = r.Header.Get("Authorization")
		mu.Unlock()
	}))
	defer server.Close()
	sent := func(t *testing.T, c *http.Client) string {
		t.Helper()
		resp, err := c.Get(server.URL)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		mu.Lock()
		defer mu.Unlock()
		return seenAuth
	}

	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	oldToken, newToken := testToken("old", now.Add(10*24*time.Hour)), testToken("new", now.Add(365*24*time.Hour))
	path := filepath.Join(t.TempDir(), "kubeconfig")
	writeKubeconfig(t, path, server, oldToken)
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}

	property := &unstructured.Unstructured{}
	property.SetGroupVersionKind(clusterid.GroupVersionKind)
	property.SetName(ClusterSetPropertyName)
	scheme := runtime.NewScheme()
	reader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(property).Build()
	recorder := events.NewFakeRecorder(10)
	elected := make(chan struct{})
	close(elected)
	w := &credentialsWatcher{
		self: "credentials-test", path: path, last: readOrNil(path), current: rest.CopyConfig(cfg),
		interval: time.Minute, policy: brokercreds.Policy{WarnBefore: 30 * 24 * time.Hour, Rewarn: time.Hour},
		reader: reader, recorder: recorder, elected: elected, log: logr.Discard(), now: func() time.Time { return now },
	}
	w.token = swappableToken(cfg)
	if w.token == nil || cfg.BearerToken != "" {
		t.Fatalf("the file's bearer token was not made swappable: %+v", cfg)
	}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	expiry := func() float64 { return value(t, credentialsExpiry.WithLabelValues(w.self)) }
	reloads := func(result string) float64 { return value(t, credentialsReloads.WithLabelValues(w.self, result)) }
	nextEvent := func(t *testing.T) string {
		t.Helper()
		select {
		case e := <-recorder.Events:
			return e
		default:
			return ""
		}
	}
	ctx := context.Background()

	w.check(ctx)
	if got := sent(t, httpClient); got != "Bearer "+oldToken {
		t.Fatalf("request sent with %q, want the file's token", got)
	}
	if got, want := expiry(), float64(now.Add(10*24*time.Hour).Unix()); got != want {
		t.Fatalf("expiry metric %v, want %v", got, want)
	}
	if e := nextEvent(t); !strings.HasPrefix(e, "Warning "+brokercreds.ReasonExpiring) || !strings.Contains(e, "in 10 days") {
		t.Fatalf("event %q, want a warning 10 days ahead", e)
	}

	now = now.Add(time.Minute)
	w.check(ctx)
	if e := nextEvent(t); e != "" {
		t.Fatalf("warned again a minute later: %q", e)
	}

	writeKubeconfig(t, path, server, newToken)
	w.check(ctx)
	if got := sent(t, httpClient); got != "Bearer "+newToken {
		t.Fatalf("after the renewal a request was sent with %q, want the renewed token", got)
	}
	if got, want := expiry(), float64(now.Add(-time.Minute).Add(365*24*time.Hour).Unix()); got != want {
		t.Fatalf("expiry metric %v after the renewal, want %v", got, want)
	}
	if e := nextEvent(t); !strings.HasPrefix(e, "Normal "+brokercreds.ReasonRenewed) {
		t.Fatalf("event %q, want the renewal", e)
	}
	if reloads("success") != 1 {
		t.Fatalf("%v successful reloads, want 1", reloads("success"))
	}

	if err := os.WriteFile(path, []byte("{not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.check(ctx)
	if got := sent(t, httpClient); got != "Bearer "+newToken {
		t.Fatalf("a broken kubeconfig changed the token in use to %q", got)
	}
	if reloads("error") != 1 {
		t.Fatalf("%v failed reloads, want 1", reloads("error"))
	}

	// A standby replica takes up tokens and sets the metric, but leaves events to the leader.
	standby := *w
	standby.elected = make(chan struct{})
	standby.seen = brokercreds.Seen{}
	now = now.Add(400 * 24 * time.Hour)
	standby.check(ctx)
	if e := nextEvent(t); e != "" {
		t.Fatalf("a standby recorded %q", e)
	}
	w.check(ctx)
	if e := nextEvent(t); !strings.HasPrefix(e, "Warning "+brokercreds.ReasonExpired) {
		t.Fatalf("event %q once the token expired, want %s", e, brokercreds.ReasonExpired)
	}
}

func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	out := &dto.Metric{}
	if err := m.Write(out); err != nil {
		t.Fatal(err)
	}
	if out.Gauge != nil {
		return out.GetGauge().GetValue()
	}
	return out.GetCounter().GetValue()
}
