// Package faultproxy stands between one client and a Kubernetes API server so that fault tests can
// break the path the way networks and overloaded servers do: fail a share of writes with a status
// the client has to handle, or cut the client off altogether. The client talks plain HTTP to the
// proxy, which forwards with the upstream credentials; so each proxy also counts exactly the
// writes its one client made, which the API server's own metrics cannot tell apart.
package faultproxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Fault is what the proxy does to a write it fails.
type Fault struct {
	// Code is the HTTP status answered: 409 (Conflict) and 500 (InternalError) are the ones
	// controllers meet in practice.
	Code int
	// AfterApply forwards the write first and reports the failure afterwards, as a server that
	// timed out after committing does: the client cannot tell whether its write happened.
	AfterApply bool
}

// Proxy is one running fault-injecting proxy.
type Proxy struct {
	// URL is where the client reaches the proxy (http://127.0.0.1:port).
	URL string

	server   *http.Server
	listener *cuttable
	forward  *httputil.ReverseProxy

	mu     sync.Mutex
	share  float64
	faults []Fault
	rng    *rand.Rand
	counts Counts
}

// Start listens on a free loopback port and forwards to the API server of upstream.
func Start(upstream *rest.Config) (*Proxy, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("upstream host %q: %w", upstream.Host, err)
	}
	if target.Scheme == "" {
		target, err = url.Parse("https://" + upstream.Host)
		if err != nil {
			return nil, err
		}
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("upstream transport: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		URL:      "http://" + l.Addr().String(),
		listener: &cuttable{Listener: l, live: map[net.Conn]bool{}},
		rng:      rand.New(rand.NewPCG(1, 2)),
		counts:   Counts{},
	}
	p.forward = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches are long responses streamed event by event.
		FlushInterval: -1,
		// A cut or a server going away breaks responses mid-body; the client sees that already.
		ErrorLog: log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			w.Header().Set(unreachableHeader, "true")
			writeStatus(w, http.StatusBadGateway, "proxy: "+err.Error())
		},
	}
	p.server = &http.Server{Handler: p}
	go func() { _ = p.server.Serve(p.listener) }()
	return p, nil
}

// StartFromKubeconfig starts a proxy in front of the cluster a kubeconfig file points at.
func StartFromKubeconfig(path, context string) (*Proxy, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: path},
		&clientcmd.ConfigOverrides{CurrentContext: context},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return Start(cfg)
}

// WriteKubeconfig writes a kubeconfig that reaches the upstream through the proxy.
func (p *Proxy) WriteKubeconfig(path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: p.URL}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	return clientcmd.WriteToFile(*kc, path)
}

// FailWrites makes the given share (0 to 1) of the writes that follow fail, each with one of
// faults chosen at random (seeded, so a run can be repeated). Leases and Events always pass: the
// first would only turn the fault into a lost member, the second changes nothing that matters.
// A share of 0 stops failing.
func (p *Proxy) FailWrites(share float64, seed uint64, faults ...Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.share, p.faults = share, faults
	p.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// Cut closes every connection and refuses new ones until Restore, as a network partition (or a
// server down) looks to the client.
func (p *Proxy) Cut() { p.listener.cut(true) }

// Restore lets the client through again.
func (p *Proxy) Restore() { p.listener.cut(false) }

// Counts returns a copy of every request the proxy counted so far.
func (p *Proxy) Counts() Counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.counts)
}

// Close stops the proxy and closes every connection.
func (p *Proxy) Close() error {
	p.listener.cut(true)
	return p.server.Close()
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Classify(r.Method, r.URL.Path, r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1")
	fault, failed := p.decide(req)
	switch {
	case !failed:
		p.forward.ServeHTTP(w, r)
		p.unreachable(req, w.Header())
	case fault.AfterApply:
		// The upstream answer is thrown away: the client sees only the failure.
		d := discard{header: http.Header{}}
		p.forward.ServeHTTP(d, r)
		p.unreachable(req, d.header)
		writeStatus(w, fault.Code, "injected after the write was applied")
	default:
		writeStatus(w, fault.Code, "injected before the write reached the server")
	}
}

// unreachableHeader marks, for the proxy itself, an answer it made up because the upstream could
// not be reached.
const unreachableHeader = "X-Faultproxy-Unreachable"

// unreachable counts a request that never reached the upstream (a server down, say).
func (p *Proxy) unreachable(req Request, answered http.Header) {
	if answered.Get(unreachableHeader) == "" {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	key := Key{Resource: req.Resource, Verb: req.Verb}
	c := p.counts[key]
	c.Unreachable++
	p.counts[key] = c
}

// decide counts the request and says whether (and how) it fails: only writes ever fail.
func (p *Proxy) decide(req Request) (Fault, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := Key{Resource: req.Resource, Verb: req.Verb}
	c := p.counts[key]
	c.Total++
	failed := false
	var fault Fault
	if req.Write && req.Resource != "leases" && req.Resource != "events" && len(p.faults) > 0 && p.rng.Float64() < p.share {
		fault, failed = p.faults[p.rng.IntN(len(p.faults))], true
		c.Failed++
	}
	p.counts[key] = c
	return fault, failed
}

// writeStatus answers as the API server would, with a Status the client decodes into an error.
func writeStatus(w http.ResponseWriter, code int, message string) {
	reason := metav1.StatusReasonInternalError
	switch code {
	case http.StatusConflict:
		reason = metav1.StatusReasonConflict
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		reason = metav1.StatusReasonServiceUnavailable
	}
	body, _ := json.Marshal(metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message,
	})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// discard is a ResponseWriter for answers nobody reads.
type discard struct{ header http.Header }

func (d discard) Header() http.Header         { return d.header }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

// cuttable is a listener whose connections can all be dropped at once, and which drops new ones
// while cut.
type cuttable struct {
	net.Listener
	mu   sync.Mutex
	down bool
	live map[net.Conn]bool
}

func (l *cuttable) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		if l.down {
			l.mu.Unlock()
			_ = c.Close()
			continue
		}
		tracked := &trackedConn{Conn: c, owner: l}
		l.live[tracked] = true
		l.mu.Unlock()
		return tracked, nil
	}
}

func (l *cuttable) cut(down bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.down = down
	if !down {
		return
	}
	for c := range l.live {
		_ = c.(*trackedConn).Conn.Close()
		delete(l.live, c)
	}
}

type trackedConn struct {
	net.Conn
	owner *cuttable
	once  sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.owner.mu.Lock()
		delete(c.owner.live, c)
		c.owner.mu.Unlock()
	})
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
