package podnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/creack/pty"
	"k8s.io/client-go/util/cert"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// KubeletServer answers the calls the API server makes to a Node's kubelet for the Pods a
// Runtime runs: `kubectl exec` runs in the Pod's network namespace with its resolver, and
// `kubectl logs` reads the containers' output. Every other call goes to kwok's own server.
//
// kwok v0.8.0 runs exec'd commands on the host, and crashes when an exec asks for a TTY without
// stdin (it tunnels a nil reader); serving exec here avoids both.
type KubeletServer struct {
	// Addr is where it listens (host:port on the host's loopback).
	Addr string

	srv *http.Server
}

// Stream timeouts as the kubelet's defaults: an interactive shell may sit idle for hours.
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = 30 * time.Second
)

// ServeKubelet listens on addr with a self-signed certificate (the API server does not check
// kubelets' certificates unless told to) and proxies what it does not serve to kwok.
func (r *Runtime) ServeKubelet(addr, kwok string) (*KubeletServer, error) {
	kwokURL, err := url.Parse(kwok)
	if err != nil {
		return nil, err
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.ParseIP(host)}, nil)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := tls.Listen("tcp", addr, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(kwokURL)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // kwok's own self-signed server on loopback
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{namespace}/{pod}/{container}", r.serveExec)
	mux.HandleFunc("/exec/{namespace}/{pod}/{uid}/{container}", r.serveExec)
	mux.HandleFunc("/containerLogs/{namespace}/{pod}/{container}", r.serveLogs)
	mux.Handle("/", proxy)
	s := &KubeletServer{Addr: ln.Addr().String(), srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Close stops the server and every stream under way.
func (s *KubeletServer) Close() error { return s.srv.Close() }

func (r *Runtime) serveExec(w http.ResponseWriter, req *http.Request) {
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	if _, ok := r.Sandbox(ns, pod); !ok {
		// Not one of ours (not running yet, or on a Node outside the network): kwok's answer.
		http.Error(w, fmt.Sprintf("pod %s/%s is not running in the local pod network", ns, pod), http.StatusNotFound)
		return
	}
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	remotecommand.ServeExec(w, req, execInPod{r}, ns+"/"+pod, req.PathValue("uid"), container, req.URL.Query()["command"],
		opts, streamIdleTimeout, streamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// execInPod runs exec'd commands as the Pod's containers run: in its namespace, with the
// container's environment.
type execInPod struct{ r *Runtime }

func (e execInPod) ExecInContainer(ctx context.Context, name, _ string, container string, argv []string,
	in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	ns, pod, _ := strings.Cut(name, "/")
	sb, env, ok := e.r.execTarget(ns, pod, container)
	if !ok {
		return fmt.Errorf("container %s of pod %s is not running in the local pod network", container, name)
	}
	if len(argv) == 0 {
		return errors.New("no command to run")
	}
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", sb.Netns}, argv...)...)
	cmd.Env = env
	var err error
	if tty {
		err = runWithTTY(cmd, in, out, resize)
	} else {
		cmd.Stdin, cmd.Stdout, cmd.Stderr = in, out, errOut
		err = cmd.Run()
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return utilexec.CodeExitError{Err: err, Code: exit.ExitCode()}
	}
	return err
}

// runWithTTY runs cmd on a new terminal. Without stdin (kubectl exec -t, no -i) nothing is
// copied in, and the command sees a terminal that never types.
func runWithTTY(cmd *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	term, err := pty.Start(cmd)
	if err != nil {
		return err
	}
	defer term.Close()
	go func() {
		for size := range resize {
			_ = pty.Setsize(term, &pty.Winsize{Rows: size.Height, Cols: size.Width})
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(term, in) }()
	}
	// The terminal reports EIO once the command and its children closed it: its end, not a failure.
	_, _ = io.Copy(out, term)
	return cmd.Wait()
}

func (r *Runtime) serveLogs(w http.ResponseWriter, req *http.Request) {
	ns, pod, container := req.PathValue("namespace"), req.PathValue("pod"), req.PathValue("container")
	if _, ok := r.Sandbox(ns, pod); !ok {
		http.Error(w, fmt.Sprintf("pod %s/%s is not running in the local pod network", ns, pod), http.StatusNotFound)
		return
	}
	f, err := os.Open(r.LogPath(ns, pod, container))
	if err != nil {
		http.Error(w, fmt.Sprintf("container %s of pod %s/%s has no output: %v", container, ns, pod, err), http.StatusNotFound)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	q := req.URL.Query()
	if err := writeLogs(req.Context(), w, f, q.Get("tailLines"), q.Get("follow") == "true"); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
	}
}
