package localset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Component is one control-plane process kwokctl started for a cluster (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok-controller), as fault tests stop and start it.
type Component struct {
	Cluster, Name string
	pidFile, log  string
	// How it was started, read from /proc before it was stopped, so it comes back the same.
	args, env []string
	dir       string
}

// Component finds a running component of a cluster by the process id kwokctl recorded.
func (cs *ClusterSet) Component(cluster, name string) (*Component, error) {
	dir := kwokClusterDir(cs.Workdir, cluster)
	c := &Component{Cluster: cluster, Name: name,
		pidFile: filepath.Join(dir, "pids", name+".pid"), log: filepath.Join(dir, "logs", name+".log")}
	pid, err := c.PID()
	if err != nil {
		return nil, err
	}
	if c.args, err = procList(pid, "cmdline"); err != nil {
		return nil, fmt.Errorf("%s of %s (pid %d): %w", name, cluster, pid, err)
	}
	if c.env, err = procList(pid, "environ"); err != nil {
		return nil, fmt.Errorf("%s of %s (pid %d): %w", name, cluster, pid, err)
	}
	if c.dir, err = os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil {
		return nil, fmt.Errorf("%s of %s (pid %d): %w", name, cluster, pid, err)
	}
	return c, nil
}

// PID is the component's process id as recorded now.
func (c *Component) PID() (int, error) {
	raw, err := os.ReadFile(c.pidFile)
	if err != nil {
		return 0, fmt.Errorf("%s of %s: %w", c.Name, c.Cluster, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(raw)))
}

// Running reports whether the component's recorded process is alive.
func (c *Component) Running() bool {
	pid, err := c.PID()
	return err == nil && processAlive(pid)
}

// Stop ends the component with sig (SIGTERM for a clean stop, SIGKILL for a crash) and waits
// until its process is gone.
func (c *Component) Stop(ctx context.Context, sig syscall.Signal) error {
	pid, err := c.PID()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling %s of %s (pid %d): %w", c.Name, c.Cluster, pid, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(5 * time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Start runs the component again with the command line, environment and directory it had, its
// output appended to its log, and records the new process id where kwokctl (and Down) look
// for it.
func (c *Component) Start() error {
	logFile, err := os.OpenFile(c.log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.args[0], c.args[1:]...)
	cmd.Env, cmd.Dir = c.env, c.dir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s of %s again: %w", c.Name, c.Cluster, err)
	}
	// Reaped here so that it never lingers as a zombie once Down has stopped it.
	go func() {
		_ = cmd.Wait()
		logFile.Close()
	}()
	return os.WriteFile(c.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// Arg returns the value of a --name=value flag of the component's command line.
func (c *Component) Arg(name string) (string, bool) {
	for i, a := range c.args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(c.args) {
			return c.args[i+1], true
		}
	}
	return "", false
}

func procList(pid int, file string) ([]string, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return nil, err
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("/proc/%d/%s is empty", pid, file)
	}
	return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"), nil
}

// CompactEtcd compacts a cluster's etcd up to its current revision, through etcd's JSON gateway,
// and returns that revision. Every watch resumed from an older resource version then fails with
// "too old resource version" once it can no longer be served from the API server's cache, and its
// client must list again: the fault that a long partition or a slow client meets in production.
func (cs *ClusterSet) CompactEtcd(ctx context.Context, cluster string) (int64, error) {
	apiserver, err := cs.Component(cluster, "kube-apiserver")
	if err != nil {
		return 0, err
	}
	servers, ok := apiserver.Arg("etcd-servers")
	if !ok {
		return 0, fmt.Errorf("the kube-apiserver of %s has no --etcd-servers", cluster)
	}
	endpoint := strings.Split(servers, ",")[0]
	var status struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// The key "\x00" matches nothing; the answer's header carries the current revision.
	if err := etcdCall(ctx, endpoint+"/v3/kv/range", `{"key":"AA=="}`, &status); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(status.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd of %s answered revision %q: %w", cluster, status.Header.Revision, err)
	}
	body := fmt.Sprintf(`{"revision":"%d","physical":true}`, rev)
	if err := etcdCall(ctx, endpoint+"/v3/kv/compaction", body, &struct{}{}); err != nil {
		return 0, err
	}
	return rev, nil
}

func etcdCall(ctx context.Context, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", url, resp.Status, raw)
	}
	return json.Unmarshal(raw, out)
}
