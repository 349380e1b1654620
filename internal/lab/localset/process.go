package localset

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a fleetslice component (manager or agent) started for a local ClusterSet. It is
// stopped by its own process id, never by name.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan error
}

// StartProcess runs binary with args, its output going to <workdir>/logs/<name>.log.
func (cs *ClusterSet) StartProcess(name, binary string, args ...string) (*Process, error) {
	return StartProcess(filepath.Join(cs.Workdir, "logs"), name, binary, args...)
}

// StartProcess runs binary with args in its own process group, its output appended to
// <logDir>/<name>.log: a process started again (a manager restarted by a bench phase) keeps the
// log of its earlier runs, each after a line saying when it started.
func StartProcess(logDir, name, binary string, args ...string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, name+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Fprintf(logFile, "--- %s started %s ---\n", name, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		logFile.Close()
		return nil, err
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so a Ctrl-C in the terminal reaches only us and we stop it in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, done: make(chan error, 1)}
	go func() {
		p.done <- cmd.Wait()
		logFile.Close()
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case err := <-p.done:
		p.done <- err
		return true, err
	default:
		return false, nil
	}
}

// Describe says whether the process still runs and ends with the last lines of its log: what an
// error about a measurement that depended on it should carry.
func (p *Process) Describe(lines int) string {
	state := "running"
	if exited, err := p.Exited(); exited {
		state = fmt.Sprintf("exited (%v)", err)
	}
	log, err := os.ReadFile(p.Log)
	if err != nil {
		return fmt.Sprintf("%s: %s; its log: %v", p.Name, state, err)
	}
	return fmt.Sprintf("%s: %s; the end of its log:\n%s", p.Name, state, tail(log, lines))
}

// Stop sends SIGTERM, waits up to grace for a clean exit, then kills.
func (p *Process) Stop(grace time.Duration) error {
	if exited, _ := p.Exited(); exited {
		return nil
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-p.done:
		p.done <- err // keep the result for Exited and later Stops
		return nil
	case <-time.After(grace):
		if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return err
		}
		err := <-p.done
		p.done <- err
		return fmt.Errorf("%s (pid %d) did not stop within %s and was killed", p.Name, p.cmd.Process.Pid, grace)
	}
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// StartManager runs binDir/manager against a member, with its own broker identity, as
// `fleetslice run` does: EndpointSlice, topology and multi-cluster controllers.
func (cs *ClusterSet) StartManager(member, binDir string, extra ...string) (*Process, error) {
	args := append([]string{"--kubeconfig", cs.Kubeconfig, "--context", Context(member),
		"--broker-kubeconfig", cs.BrokerKubeconfig(member), "--cluster-lease-duration", "10s",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, extra...)
	return cs.StartProcess("manager-"+member, filepath.Join(binDir, "manager"), args...)
}

// AgentNodes names one Node per zone of a member: the Nodes `fleetslice run` runs a dry-run node
// agent for (one per zone shows every zone's view without an agent per simulated Node).
func (cs *ClusterSet) AgentNodes(member string) []string {
	nodes := make([]string, 0, len(cs.Zones))
	for _, z := range cs.Zones {
		nodes = append(nodes, nodeName(member, z, 0))
	}
	return nodes
}

// RulesetPath is where the dry-run agent of a Node writes its ruleset.
func (cs *ClusterSet) RulesetPath(node string) string {
	return filepath.Join(cs.Workdir, "rulesets", node+".nft")
}

// componentsRunning checks that every component kwokctl started for every cluster still runs,
// and names the ones that do not with the end of their logs.
func (cs *ClusterSet) componentsRunning() error {
	var errs []error
	for _, name := range append([]string{cs.Broker}, cs.Members...) {
		dir := kwokClusterDir(cs.Workdir, name)
		pidFiles, err := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
		if err != nil {
			return err
		}
		if len(pidFiles) == 0 {
			errs = append(errs, fmt.Errorf("cluster %s: kwokctl recorded no components in %s", name, dir))
		}
		for _, pidFile := range pidFiles {
			component := strings.TrimSuffix(filepath.Base(pidFile), ".pid")
			raw, err := os.ReadFile(pidFile)
			if err != nil {
				return err
			}
			pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
			if err != nil {
				return fmt.Errorf("cluster %s: reading %s: %w", name, pidFile, err)
			}
			if processAlive(pid) {
				continue
			}
			logTail, _ := os.ReadFile(filepath.Join(dir, "logs", component+".log"))
			errs = append(errs, fmt.Errorf("cluster %s: %s (pid %d) is not running; the end of its log:\n%s",
				name, component, pid, tail(logTail, 15)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", errComponentExited, errors.Join(errs...))
	}
	return nil
}

// errComponentExited marks a control-plane component found dead after the start.
var errComponentExited = errors.New("a control-plane component is not running")

// ResidentBytes returns a process's resident set size, 0 if it cannot be read.
func ResidentBytes(pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// CPUTime returns the CPU time (user and system) a process has used so far, 0 if it cannot be
// read.
func CPUTime(pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; the fields after it start past its ')'.
	end := strings.LastIndexByte(string(raw), ')')
	if end < 0 {
		return 0
	}
	fields := strings.Fields(string(raw)[end+1:])
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}
