package lightset

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetslice/fleetslice/internal/lab/localset"
	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// BrokerName names the broker for StopAPIServer and StartAPIServer.
const BrokerName = "broker"

// apiServerStopGrace is how long a kube-apiserver gets to exit after SIGTERM before it is
// killed. With a watch open it does not exit before its own shutdown timeout (a minute): it
// leaves open watches alone until then. It keeps no state of its own, so it is killed after a
// short grace, as a crash would end it. apiServerStartTimeout is how long it gets to report
// ready again, as envtest gives it.
const (
	apiServerStopGrace    = 3 * time.Second
	apiServerStartTimeout = 2 * time.Minute
)

// cluster is the broker (BrokerName) or the member of that id.
func (s *Set) cluster(name string) (*testenv.Cluster, error) {
	if name == BrokerName {
		return s.Broker, nil
	}
	for i, id := range s.IDs {
		if id == name {
			return s.Members[i], nil
		}
	}
	return nil, fmt.Errorf("no cluster %q in the set", name)
}

// StopAPIServer stops the kube-apiserver of one cluster (BrokerName or a member id), found by
// its process id: SIGTERM, then SIGKILL after apiServerStopGrace. Its etcd keeps running with the
// data; StartAPIServer starts it again with the same command line, so its address,
// certificates and clients stay valid.
func (s *Set) StopAPIServer(name string) error {
	c, err := s.cluster(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	stopped, restarted := s.stoppedAPIServers[name] != nil, s.apiServers[name]
	delete(s.apiServers, name)
	s.mu.Unlock()
	if stopped {
		return fmt.Errorf("the kube-apiserver of %s is stopped already", name)
	}
	if restarted != nil {
		// Started by StartAPIServer: ours to stop, command line known. Stop fails when it had to
		// kill; gone is all that matters here.
		s.setStopped(name, restarted.Args)
		return restarted.stop()
	}
	pid, _, err := ControlPlanePIDs(c.Config.Host)
	if err != nil {
		return err
	}
	args, err := commandLine(pid)
	if err != nil {
		return fmt.Errorf("reading the command line of the kube-apiserver of %s: %w", name, err)
	}
	if err := stopPID(pid, apiServerStopGrace); err != nil {
		return fmt.Errorf("stopping the kube-apiserver of %s (pid %d): %w", name, pid, err)
	}
	s.setStopped(name, args)
	return nil
}

func (s *Set) setStopped(name string, args []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stoppedAPIServers[name] = args
}

// StartAPIServer starts a kube-apiserver StopAPIServer stopped, with the command line it had,
// and waits until it reports ready. Stop stops it with the rest of the set.
func (s *Set) StartAPIServer(ctx context.Context, name string) error {
	c, err := s.cluster(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	args := s.stoppedAPIServers[name]
	s.mu.Unlock()
	if args == nil {
		return fmt.Errorf("the kube-apiserver of %s was not stopped", name)
	}
	p, err := localset.StartProcess(filepath.Join(s.opts.Workdir, "logs"), "kube-apiserver-"+name, args[0], args[1:]...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.stoppedAPIServers, name)
	s.apiServers[name] = &apiServer{Process: p, Args: args}
	s.mu.Unlock()
	if err := waitReady(ctx, c, p); err != nil {
		return fmt.Errorf("restarting the kube-apiserver of %s: %w", name, err)
	}
	return nil
}

// apiServer is a kube-apiserver StartAPIServer started, with its command line.
type apiServer struct {
	*localset.Process
	Args []string
}

// stop stops it as StopAPIServer does. Process.Stop fails when it had to kill; gone is all that
// matters here.
func (a *apiServer) stop() error {
	if err := a.Stop(apiServerStopGrace); err != nil {
		if exited, _ := a.Exited(); !exited {
			return err
		}
	}
	return nil
}

// waitReady polls the API server's /readyz until it answers ok, while its process runs.
func waitReady(ctx context.Context, c *testenv.Cluster, p *localset.Process) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, apiServerStartTimeout, true, func(ctx context.Context) (bool, error) {
		if exited, _ := p.Exited(); exited {
			return false, errors.New(p.Describe(20))
		}
		reqCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, last = cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(reqCtx)
		return last == nil, nil
	})
	if wait.Interrupted(err) {
		return fmt.Errorf("not ready after %s (last: %v): %s", apiServerStartTimeout, last, p.Describe(20))
	}
	return err
}

// stopAPIServers stops the kube-apiservers StartAPIServer started; the set's control planes
// stop the others (and remove their certificate directories, which these use) afterwards.
func (s *Set) stopAPIServers() error {
	s.mu.Lock()
	servers := s.apiServers
	s.apiServers = map[string]*apiServer{}
	s.mu.Unlock()
	var errs []error
	for _, p := range servers {
		errs = append(errs, p.stop())
	}
	return errors.Join(errs...)
}

func commandLine(pid int) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	if len(args) == 0 || args[0] == "" {
		return nil, fmt.Errorf("process %d has no command line", pid)
	}
	return args, nil
}

// stopPID stops a control-plane process started by envtest, which reaps it: SIGTERM, SIGKILL if
// it has not exited after grace, and then a bounded wait for it to be gone.
func stopPID(pid int, grace time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	if waitExited(pid, grace) {
		return nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	if !waitExited(pid, 10*time.Second) {
		return errors.New("still running 10s after SIGKILL")
	}
	return nil
}

func waitExited(pid int, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for !exited(pid) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// exited reports whether a process is gone or a zombie waiting to be reaped: either way it no
// longer holds its ports.
func exited(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command name in parentheses, which may itself contain spaces.
	rest := string(raw[strings.LastIndexByte(string(raw), ')')+1:])
	fields := strings.Fields(rest)
	return len(fields) == 0 || fields[0] == "Z" || fields[0] == "X"
}
