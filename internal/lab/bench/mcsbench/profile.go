package mcsbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetslice/fleetslice/controllers/reconnect"
	"github.com/fleetslice/fleetslice/internal/lab/apimetrics"
)

// phaseProfile is what --multicluster-fleet-profile-dir collects while a phase runs: a CPU profile
// of every API server, and every request each one served (reads too, by verb, resource and code),
// which together say where the control planes' CPU beyond the write floor goes.
type phaseProfile struct {
	f       *fleet
	phase   string
	seconds int
	before  [][]byte
	// managersBefore are the managers' metrics when the phase began, by member (nil: a manager
	// just started, whose counters begin at zero).
	managersBefore map[string][]byte
	profiles       sync.WaitGroup
	errs           []error
}

// startProfile begins profiling the set's API servers for the first seconds of a phase (which
// should end before the phase does, or the profile holds idle time); it does nothing without a
// profile directory. The API server named restarting (none if empty) is being started again: its
// profile begins once it answers, and all it served since its start counts.
func (f *fleet) startProfile(ctx context.Context, phase string, seconds int, restarting string) (*phaseProfile, error) {
	if f.o.profileDir == "" {
		return nil, nil
	}
	if err := os.MkdirAll(f.o.profileDir, 0o755); err != nil {
		return nil, err
	}
	p := &phaseProfile{f: f, phase: phase, seconds: seconds, managersBefore: map[string][]byte{}}
	for _, id := range f.set.IDs {
		if addr := f.set.MetricsAddress(id); addr != "" {
			p.managersBefore[id], _ = managerMetrics(ctx, addr)
		}
	}
	for _, c := range f.clusters() {
		if c.Name == restarting {
			p.before = append(p.before, nil) // its counters begin at zero
			continue
		}
		raw, err := apimetrics.Scrape(ctx, c.Config)
		if err != nil {
			return nil, err
		}
		p.before = append(p.before, raw)
	}
	var mu sync.Mutex
	fetch := func(name string, get func() ([]byte, error)) {
		p.profiles.Go(func() {
			raw, err := get()
			if err == nil {
				err = os.WriteFile(filepath.Join(f.o.profileDir, fmt.Sprintf("%s-%s.pprof", phase, name)), raw, 0o644)
			}
			if err != nil {
				mu.Lock()
				p.errs = append(p.errs, fmt.Errorf("profiling %s: %w", name, err))
				mu.Unlock()
			}
		})
	}
	for _, c := range f.clusters() {
		fetch("apiserver-"+c.Name, func() ([]byte, error) { return apiServerProfile(ctx, c.Config, seconds) })
	}
	for _, id := range f.set.IDs {
		if addr := f.set.PprofAddress(id); addr != "" {
			fetch("manager-"+id, func() ([]byte, error) { return managerProfile(ctx, addr, seconds) })
		}
	}
	return p, nil
}

// finish waits for the profiles and writes the requests served since startProfile.
func (p *phaseProfile) finish(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.profiles.Wait()
	var out strings.Builder
	for i, c := range p.f.clusters() {
		after, err := apimetrics.Scrape(ctx, c.Config)
		if err != nil {
			return err
		}
		served, err := requestsBetween(p.before[i], after)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "# %s\n", c.Name)
		for _, key := range slices.Sorted(maps.Keys(served)) {
			fmt.Fprintf(&out, "%8d %s\n", served[key], key)
		}
	}
	p.writeReconciles(ctx)
	path := filepath.Join(p.f.o.profileDir, p.phase+"-requests.txt")
	p.f.logf("%s: API server profiles and requests served in %s", p.phase, p.f.o.profileDir)
	return errors.Join(append(p.errs, os.WriteFile(path, []byte(out.String()), 0o644))...)
}

// apiServerProfile asks an API server for a CPU profile of seconds, waiting up to a minute for
// one being started again to answer.
func apiServerProfile(ctx context.Context, cfg *rest.Config, seconds int) ([]byte, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = time.Duration(2*seconds) * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var raw []byte
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		raw, last = cs.RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
		return !reconnect.Unreachable(last), nil
	})
	if err != nil {
		return nil, fmt.Errorf("not answering: %w (last: %v)", err, last)
	}
	return raw, last
}

// managerProfile asks a manager serving pprof on addr for a CPU profile of seconds, waiting a
// little for a manager just started to listen.
func managerProfile(ctx context.Context, addr string, seconds int) ([]byte, error) {
	raw, err := managerGet(ctx, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, seconds), 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("%s does not serve pprof: %w", addr, err)
	}
	return raw, nil
}

// managerGet reads one page a manager serves, retrying for up to within while it does not
// answer yet (a manager just started).
func managerGet(ctx context.Context, url string, within time.Duration) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	var resp *http.Response
	var last error
	// The condition runs at least once, even with within 0.
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, within, true, func(context.Context) (bool, error) {
		resp, last = http.DefaultClient.Do(req)
		return last == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w (last: %v)", err, last)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s", resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// requestsBetween counts every request (verb, resource/subresource, code) two expositions of
// one API server differ by.
func requestsBetween(before, after []byte) (map[string]int, error) {
	count := func(exposition []byte) (map[string]int, error) {
		n := map[string]int{}
		err := apimetrics.EachRequest(exposition, func(verb, resource, code string, value int) {
			n[fmt.Sprintf("%-7s %-40s %s", verb, resource, code)] += value
		})
		return n, err
	}
	b, err := count(before)
	if err != nil {
		return nil, err
	}
	a, err := count(after)
	if err != nil {
		return nil, err
	}
	for k, v := range b {
		if a[k] -= v; a[k] == 0 {
			delete(a, k)
		}
	}
	return a, nil
}

// managerSeries are the manager metrics a phase's profile counts: syncs by controller and
// result, and the events each controller's queue took in (of which the queue merged those for a
// key already waiting).
var managerSeries = []string{"controller_runtime_reconcile_total{", "workqueue_adds_total{"}

// writeReconciles writes, per manager, how many syncs each controller ran and how many events
// its queue took in while the phase's profiles were taken: the syncs a phase costs beside the
// writes it makes. A manager that does not answer is left out.
func (p *phaseProfile) writeReconciles(ctx context.Context) {
	var out strings.Builder
	for _, id := range p.f.set.IDs {
		addr := p.f.set.MetricsAddress(id)
		if addr == "" {
			continue
		}
		after, err := managerMetrics(ctx, addr)
		if err != nil {
			fmt.Fprintf(&out, "# manager-%s: %v\n", id, err)
			continue
		}
		fmt.Fprintf(&out, "# manager-%s\n", id)
		lines, err := countersBetween(p.managersBefore[id], after)
		if err != nil {
			fmt.Fprintf(&out, "# unreadable metrics: %v\n", err)
		}
		for _, line := range lines {
			out.WriteString(line + "\n")
		}
	}
	path := filepath.Join(p.f.o.profileDir, p.phase+"-reconciles.txt")
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		p.errs = append(p.errs, err)
	}
}

// countersBetween lists the managerSeries two expositions differ by, one "metric labels delta"
// line each, sorted; a malformed exposition is an error, with what could be read listed.
func countersBetween(before, after []byte) ([]string, error) {
	count := func(exposition []byte) (map[string]float64, error) {
		n := map[string]float64{}
		var errs []error
		for _, prefix := range managerSeries {
			errs = append(errs, apimetrics.EachSeries(exposition, prefix, func(labels map[string]string, value float64) {
				key := strings.TrimSuffix(prefix, "{")
				for _, name := range slices.Sorted(maps.Keys(labels)) {
					key += " " + name + "=" + labels[name]
				}
				n[key] += value
			}))
		}
		return n, errors.Join(errs...)
	}
	b, errBefore := count(before)
	a, errAfter := count(after)
	var out []string
	for _, key := range slices.Sorted(maps.Keys(a)) {
		if d := a[key] - b[key]; d != 0 {
			out = append(out, fmt.Sprintf("%-90s %8.0f", key, d))
		}
	}
	return out, errors.Join(errBefore, errAfter)
}

// managerMetrics reads a manager's metrics exposition.
func managerMetrics(ctx context.Context, addr string) ([]byte, error) {
	return managerGet(ctx, "http://"+addr+"/metrics", 0)
}
