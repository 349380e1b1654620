package podnet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/fleetslice/fleetslice/internal/lab/netns"
)

// prober runs one container's readiness probe as the kubelet does: after initialDelaySeconds,
// every periodSeconds, ready after successThreshold successes in a row and not ready after
// failureThreshold failures in a row. It reports each change of readiness.
type prober struct {
	probe     *corev1.Probe
	container *corev1.Container
	netns     string
	podIP     string
	env       []string
	report    func(ready bool)
}

func (p *prober) run(ctx context.Context) {
	period := seconds(p.probe.PeriodSeconds, 10)
	successes, failures := 0, 0
	ready := false
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(p.probe.InitialDelaySeconds) * time.Second):
	}
	for {
		if err := p.once(ctx); err == nil {
			successes, failures = successes+1, 0
			if !ready && successes >= int(max(p.probe.SuccessThreshold, 1)) {
				ready = true
				p.report(true)
			}
		} else {
			successes, failures = 0, failures+1
			if ready && failures >= int(threshold(p.probe.FailureThreshold, 3)) {
				ready = false
				p.report(false)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(period):
		}
	}
}

// once runs the probe one time; nil means it passed.
func (p *prober) once(ctx context.Context) error {
	timeout := seconds(p.probe.TimeoutSeconds, 1)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch h := p.probe.ProbeHandler; {
	case h.TCPSocket != nil:
		port, err := p.port(h.TCPSocket.Port)
		if err != nil {
			return err
		}
		conn, err := netns.DialIn(p.netns, "tcp", net.JoinHostPort(p.host(h.TCPSocket.Host), port), timeout)
		if err != nil {
			return err
		}
		return conn.Close()
	case h.HTTPGet != nil:
		return p.httpGet(ctx, h.HTTPGet, timeout)
	case h.Exec != nil:
		cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", p.netns}, h.Exec.Command...)...)
		cmd.Env = p.env
		return cmd.Run()
	}
	return fmt.Errorf("probe of container %s has no handler the local ClusterSet runs (tcpSocket, httpGet, exec)", p.container.Name)
}

func (p *prober) httpGet(ctx context.Context, get *corev1.HTTPGetAction, timeout time.Duration) error {
	port, err := p.port(get.Port)
	if err != nil {
		return err
	}
	transport := &http.Transport{
		DialContext: func(_ context.Context, network, addr string) (net.Conn, error) {
			return netns.DialIn(p.netns, network, addr, timeout)
		},
		DisableKeepAlives: true,
	}
	scheme := "http"
	if get.Scheme == corev1.URISchemeHTTPS {
		return fmt.Errorf("httpGet probes over HTTPS are not supported by the local ClusterSet")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+net.JoinHostPort(p.host(get.Host), port)+get.Path, nil)
	if err != nil {
		return err
	}
	for _, h := range get.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := (&http.Client{Transport: transport}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 10<<10))
	// The kubelet's rule: 2xx and 3xx pass.
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// port resolves a probe's port, by number or by the container's port name.
func (p *prober) port(port intstr.IntOrString) (string, error) {
	if port.Type == intstr.Int {
		return strconv.Itoa(port.IntValue()), nil
	}
	for _, cp := range p.container.Ports {
		if cp.Name == port.StrVal {
			return strconv.Itoa(int(cp.ContainerPort)), nil
		}
	}
	return "", fmt.Errorf("container %s has no port named %q", p.container.Name, port.StrVal)
}

func (p *prober) host(host string) string {
	if host != "" {
		return host
	}
	return p.podIP
}

func seconds(v int32, dflt int32) time.Duration {
	if v <= 0 {
		v = dflt
	}
	return time.Duration(v) * time.Second
}

func threshold(v, dflt int32) int32 {
	if v <= 0 {
		return dflt
	}
	return v
}
