package podnet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Restart back-off, as the kubelet's: doubling from a short delay to a cap, and forgotten once a
// run lasted long enough to count as healthy.
const (
	firstRestartDelay = 500 * time.Millisecond
	maxRestartDelay   = 30 * time.Second
	healthyRun        = 10 * time.Second
)

// container runs one container's command inside a Pod's namespace and restarts it as the Pod's
// restartPolicy says, until stopped.
type container struct {
	spec    containerSpec
	netns   string
	policy  corev1.RestartPolicy
	logPath string
	// exited is told each exit: the runtime turns it into an event.
	exited func(code int, restarting bool)

	mu       sync.Mutex
	cmd      *exec.Cmd
	stopping bool
	restarts int
	done     chan struct{}
}

// start runs the container in the background; stop ends it.
func (c *container) start() error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		defer logFile.Close()
		delay := firstRestartDelay
		for {
			started := time.Now()
			code, err := c.runOnce(logFile)
			if err != nil {
				fmt.Fprintf(logFile, "local ClusterSet: starting %s failed: %v\n", c.spec.Name, err)
			}
			restart := c.shouldRestart(code)
			if c.exited != nil && !c.isStopping() {
				c.exited(code, restart)
			}
			if !restart {
				return
			}
			if time.Since(started) > healthyRun {
				delay = firstRestartDelay
			}
			if !c.sleep(delay) {
				return
			}
			delay = min(2*delay, maxRestartDelay)
			c.mu.Lock()
			c.restarts++
			c.mu.Unlock()
		}
	}()
	return nil
}

// runOnce runs the command to its end and returns its exit code (-1 when it did not start).
func (c *container) runOnce(logFile *os.File) (int, error) {
	c.mu.Lock()
	if c.stopping {
		c.mu.Unlock()
		return -1, nil
	}
	// `ip netns exec` enters the namespace, mounts the Pod's resolv.conf over /etc/resolv.conf in
	// a mount namespace of its own, and execs the command: the pid stays the container's.
	cmd := exec.Command("ip", append([]string{"netns", "exec", c.netns}, c.spec.Argv...)...)
	cmd.Env = c.spec.Env
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Its own process group, so that stopping the container reaches what its shell started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err := cmd.Start()
	if err == nil {
		c.cmd = cmd
	}
	c.mu.Unlock()
	if err != nil {
		return -1, err
	}
	err = cmd.Wait()
	c.mu.Lock()
	c.cmd = nil
	c.mu.Unlock()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	return 0, err
}

func (c *container) shouldRestart(code int) bool {
	if c.isStopping() {
		return false
	}
	switch c.policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return code != 0
	}
	return true
}

func (c *container) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// sleep waits for d unless the container is stopped meanwhile.
func (c *container) sleep(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c.isStopping() {
			return false
		}
		time.Sleep(min(100*time.Millisecond, time.Until(deadline)))
	}
	return !c.isStopping()
}

// stop sends SIGTERM to the container's process group, and SIGKILL after grace.
func (c *container) stop(grace time.Duration) {
	c.mu.Lock()
	c.stopping = true
	cmd := c.cmd
	c.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	}
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	c.mu.Lock()
	cmd = c.cmd
	c.mu.Unlock()
	if cmd != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	<-c.done
}

// pid is the running process's id, 0 between runs.
func (c *container) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}
