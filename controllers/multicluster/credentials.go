package multicluster

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/fleetslice/fleetslice/controllers/multicluster/brokercreds"
	"github.com/fleetslice/fleetslice/controllers/multicluster/clusterid"
)

// ClusterSetPropertyName is the ClusterProperty `kubectl fleetslice join` writes naming the ClusterSet
// (KEP-2149): what an operator looks at for this member's membership, so the credentials'
// events are recorded on it.
const ClusterSetPropertyName = "clusterset.k8s.io"

var (
	credentialsExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: metricsPrefix + "broker_credentials_expiry_timestamp_seconds",
		Help: "When this member's broker credentials (token exp claim or client certificate NotAfter) expire, in Unix seconds; absent when they carry no expiry.",
	}, []string{"member"})
	credentialsReloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "broker_credentials_reloads_total",
		Help: "Changes of the broker kubeconfig file taken up without a restart, by result.",
	}, []string{"member", "result"})
)

func init() {
	metrics.Registry.MustRegister(credentialsExpiry, credentialsReloads)
}

// brokerToken is the bearer token every broker request carries. The broker kubeconfig file
// is a mounted Secret, which the kubelet rewrites when `kubectl fleetslice join --renew` replaces it; the
// watcher swaps the token here, so a renewal needs no restart (and so no gap in imports).
type brokerToken struct{ v atomic.Pointer[string] }

func newBrokerToken(token string) *brokerToken {
	t := &brokerToken{}
	t.set(token)
	return t
}

func (t *brokerToken) set(token string) { t.v.Store(&token) }
func (t *brokerToken) get() string      { return *t.v.Load() }

// wrap is a rest.Config WrapTransport. Requests already sent (a watch open since before a
// renewal) keep the token they were sent with; the old token stays valid until it expires.
func (t *brokerToken) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		req = utilnet.CloneRequest(req)
		req.Header.Set("Authorization", "Bearer "+t.get())
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// swappableToken moves cfg's bearer token into a brokerToken the watcher can replace, and
// returns it; nil when cfg authenticates otherwise (a client certificate, an exec plugin, a
// token file client-go re-reads by itself), which the watcher then only reports on.
func swappableToken(cfg *rest.Config) *brokerToken {
	if cfg.BearerToken == "" || cfg.BearerTokenFile != "" {
		return nil
	}
	t := newBrokerToken(cfg.BearerToken)
	cfg.BearerToken = ""
	cfg.Wrap(t.wrap)
	return t
}

// credentialsWatcher reports when this member's broker credentials expire, as a metric and as
// events on the ClusterProperty clusterset.k8s.io, and takes up a renewed token from the
// kubeconfig file. It re-checks every interval: the token does not change, time does.
type credentialsWatcher struct {
	self     string
	path     string // the broker kubeconfig file; empty when the config was given in memory
	token    *brokerToken
	current  *rest.Config // the credentials in use, the token included
	last     []byte       // the file's contents when last read
	interval time.Duration
	policy   brokercreds.Policy
	reader   client.Reader
	recorder events.EventRecorder
	elected  <-chan struct{}
	log      logr.Logger
	now      func() time.Time
	seen     brokercreds.Seen
	lastErr  string
}

// NeedLeaderElection is false: every replica's broker clients need the renewed token. Only
// the leader records events (check), so a standby does not repeat them.
func (w *credentialsWatcher) NeedLeaderElection() bool { return false }

func (w *credentialsWatcher) Start(ctx context.Context) error {
	ticker := time.NewTicker(w.interval)
	defer ticker.Stop()
	for {
		w.check(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (w *credentialsWatcher) check(ctx context.Context) {
	w.reload()
	expiry, known, err := brokercreds.Expiry(w.current.BearerToken, w.current.CertData)
	// Said once per distinct problem, not at every check.
	if msg := errString(err); msg != w.lastErr {
		w.lastErr = msg
		if err != nil {
			w.log.Error(err, "cannot tell when the broker credentials expire")
		}
	}
	if known {
		credentialsExpiry.WithLabelValues(w.self).Set(float64(expiry.Unix()))
	} else {
		credentialsExpiry.DeleteLabelValues(w.self)
	}
	select {
	case <-w.elected:
	default:
		return
	}
	ev, next := w.policy.Next(w.seen, w.now(), expiry, known)
	w.seen = next
	if ev.Reason == "" {
		return
	}
	w.log.Info("broker credentials", "reason", ev.Reason, "note", ev.Note)
	target := w.eventTarget(ctx)
	if target == nil {
		return
	}
	kind := corev1.EventTypeNormal
	if ev.Warning {
		kind = corev1.EventTypeWarning
	}
	w.recorder.Eventf(target, nil, kind, ev.Reason, "CheckBrokerCredentials", "%s", ev.Note)
}

// reload re-reads the kubeconfig file and takes up a new token. A file that cannot be read or
// parsed (mid-rewrite, or broken by hand) keeps the credentials in use.
func (w *credentialsWatcher) reload() {
	if w.path == "" {
		return
	}
	data, err := os.ReadFile(w.path)
	if err == nil && bytes.Equal(data, w.last) {
		return
	}
	var cfg *rest.Config
	if err == nil {
		// Parsed from the path, not the bytes, so that files it names resolve beside it.
		cfg, err = clientcmd.BuildConfigFromFlags("", w.path)
	}
	if err != nil {
		credentialsReloads.WithLabelValues(w.self, "error").Inc()
		w.log.Error(err, "cannot read the changed broker kubeconfig; keeping the credentials in use", "path", w.path)
		return
	}
	w.last = data
	if cfg.Host != w.current.Host || !bytes.Equal(cfg.CAData, w.current.CAData) {
		// Only credentials are taken up live: clients and caches are built for one server.
		w.log.Info("the broker kubeconfig names another server or CA; restart the manager to use them", "server", cfg.Host)
	}
	if w.token != nil && cfg.BearerToken != "" && cfg.BearerToken != w.token.get() {
		w.token.set(cfg.BearerToken)
		w.log.Info("took up the renewed broker token", "path", w.path)
	}
	if w.token != nil {
		cfg.BearerToken = w.token.get()
	}
	w.current = cfg
	credentialsReloads.WithLabelValues(w.self, "success").Inc()
}

// eventTarget is the ClusterProperty naming the ClusterSet, or the one naming this cluster
// when a manager run by hand has only that; nil (the log and metric still tell) without either.
func (w *credentialsWatcher) eventTarget(ctx context.Context) client.Object {
	for _, name := range []string{ClusterSetPropertyName, clusterid.PropertyName} {
		p := &unstructured.Unstructured{}
		p.SetGroupVersionKind(clusterid.GroupVersionKind)
		if err := w.reader.Get(ctx, client.ObjectKey{Name: name}, p); err == nil {
			return p
		}
	}
	return nil
}

// readOrNil returns the file's contents, or nil (the first check then reads it again).
func readOrNil(path string) []byte {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return data
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
