package dnsbench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// namespace holds every benchmarked Service and ServiceImport.
const namespace = "bench"

// serviceName is the i-th Service; its ServiceImport has the same name.
func serviceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// importIP is the ClusterSetIP of the i-th ServiceImport, outside the API server's Service range.
func importIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", 100+i/65536, i/256%256, i%256) }

// names are the A names of Services [0, n) in a zone, and the address each must answer.
type names struct {
	list []string
	want map[string]string
}

func (n *names) add(name, ip string) {
	n.list = append(n.list, name)
	n.want[name] = ip
}

// world is the API server's side: Services (ClusterIPs allocated by the API server) for the
// kubernetes plugin and ServiceImports for ours, written directly.
type world struct {
	c          client.Client
	clusterset names
	cluster    names
	mu         sync.Mutex
	// extra counts the Services propagate created.
	extra int
}

func newWorld(ctx context.Context, c client.Client) (*world, error) {
	w := &world{c: c, clusterset: names{want: map[string]string{}}, cluster: names{want: map[string]string{}}}
	return w, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
}

// grow creates Services and ServiceImports until there are n of each.
func (w *world) grow(ctx context.Context, n int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := len(w.cluster.list); i < n; i++ {
		g.Go(func() error {
			svc, imp := objects(i)
			if err := w.c.Create(ctx, svc); err != nil {
				return fmt.Errorf("creating Service %s: %w", svc.Name, err)
			}
			if err := w.c.Create(ctx, imp); err != nil {
				return fmt.Errorf("creating ServiceImport %s: %w", imp.Name, err)
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			w.cluster.add(dns.Fqdn(svc.Name+"."+namespace+".svc.cluster.local"), svc.Spec.ClusterIP)
			w.clusterset.add(dns.Fqdn(imp.Name+"."+namespace+".svc.clusterset.local"), imp.Spec.IPs[0])
			return nil
		})
	}
	return g.Wait()
}

func objects(i int) (*corev1.Service, *mcsv1beta1.ServiceImport) {
	meta := metav1.ObjectMeta{Namespace: namespace, Name: serviceName(i)}
	svc := &corev1.Service{ObjectMeta: meta, Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}}
	imp := &mcsv1beta1.ServiceImport{ObjectMeta: meta, Spec: mcsv1beta1.ServiceImportSpec{
		Type: mcsv1beta1.ClusterSetIP, IPs: []string{importIP(i)},
		Ports: []mcsv1beta1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}},
	}}
	return svc, imp
}

// server is fleetslice-dns serving both zones from the API server on one loopback port.
type server struct {
	cmd  *exec.Cmd
	addr string
	log  string // the server's output, shown when it exits early
	done chan error
}

// startServer runs the binary with a Corefile serving clusterset.local with our plugin and
// cluster.local with CoreDNS's kubernetes plugin, nothing else in the path of a query (no cache,
// no log), and waits until both answer.
func startServer(ctx context.Context, binary, dir string, cfg *rest.Config, probe map[string]string) (*server, error) {
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testenv.WriteKubeconfig(cfg, kubeconfig); err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	corefile := filepath.Join(dir, "Corefile")
	conf := fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    clusterset clusterset.local {
        kubeconfig %s
    }
    kubernetes cluster.local {
        kubeconfig %s
    }
}
`, port, strconv.Quote(kubeconfig), strconv.Quote(kubeconfig))
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "fleetslice-dns.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "-conf", corefile)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	s := &server{cmd: cmd, addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: logFile.Name(), done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait(); logFile.Close() }()
	for name, ip := range probe {
		if _, err := s.waitFor(ctx, name, ip, time.Minute); err != nil {
			return s, errors.Join(err, s.stop())
		}
	}
	return s, nil
}

// waitFor asks for name every millisecond until it answers ip, and returns when it first did.
func (s *server) waitFor(ctx context.Context, name, ip string, limit time.Duration) (time.Time, error) {
	c := &dns.Client{Net: "udp", Timeout: 200 * time.Millisecond}
	deadline := time.Now().Add(limit)
	last := "no answer"
	for {
		select {
		case err := <-s.done:
			s.done <- err
			return time.Time{}, fmt.Errorf("fleetslice-dns exited: %v; its output ends:\n%s", err, s.logTail())
		default:
		}
		m, _, err := c.ExchangeContext(ctx, new(dns.Msg).SetQuestion(name, dns.TypeA), s.addr)
		if err == nil {
			if last = check(m, name, ip); last == "" {
				return time.Now(), nil
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return time.Time{}, fmt.Errorf("%s did not resolve to %s within %s: %s", name, ip, limit, last)
		}
		time.Sleep(time.Millisecond)
	}
}

// logTail is the end of the server's output.
func (s *server) logTail() string {
	b, err := os.ReadFile(s.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

// stop ends the server by its process id.
func (s *server) stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("fleetslice-dns (pid %d) ignored SIGTERM and was killed", s.cmd.Process.Pid)
	}
}

// freePort returns a loopback port free for both UDP and TCP, since CoreDNS binds both: a port
// free only for UDP can be one a concurrent test's TCP socket holds, and the server then exits at
// start.
func freePort() (int, error) {
	for range 20 {
		u, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		u.Close()
		if localset.AddressFreeForDNS(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))) {
			return port, nil
		}
	}
	return 0, errors.New("no loopback port free for both UDP and TCP in 20 tries")
}
