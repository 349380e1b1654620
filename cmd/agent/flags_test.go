package main

import (
	"flag"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"sigs.k8s.io/knftables"

	"github.com/fleetslice/fleetslice/agent"
	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// Every agent flag, set to a value other than its default, must land where the agent, its
// dataplanes or its manager read it; a flag added without a row here fails the test.
func TestEveryFlagReachesTheAgent(t *testing.T) {
	rows := []struct {
		flag, value string
		landed      func(t *testing.T, f *flags) bool
	}{
		{"context", "member-a", func(_ *testing.T, f *flags) bool { return f.kubeContext == "member-a" }},
		{"node-name", "n7", func(t *testing.T, f *flags) bool { return agentOpts(t, f).NodeName == "n7" }},
		{"dataplane", "dry-run", func(t *testing.T, f *flags) bool {
			_, dry := agentOpts(t, f).Dataplanes[0].(*dataplane.DryRun)
			return dry
		}},
		{"nftables-backend", "nft", func(_ *testing.T, f *flags) bool { return f.backend == backendNft }},
		{"dry-run-output", "/tmp/ruleset", func(t *testing.T, f *flags) bool {
			return f.dryRunOutput == "/tmp/ruleset" && agentOpts(t, f).OnSync != nil
		}},
		{"pod-cidr", "10.244.0.0/16", func(_ *testing.T, f *flags) bool {
			return slices.Equal(f.dataplaneOptions()[0].PodCIDRs, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")})
		}},
		{"ip-families", "IPv6", func(t *testing.T, f *flags) bool {
			return len(agentOpts(t, f).Dataplanes) == 1 && f.dataplaneOptions()[0].Family == knftables.IPv6Family
		}},
		{"sync-period", "2h", func(t *testing.T, f *flags) bool { return agentOpts(t, f).SyncPeriod == 2*time.Hour }},
		{"drift-check-period", "5m", func(t *testing.T, f *flags) bool { return agentOpts(t, f).DriftCheckPeriod == 5*time.Minute }},
		{"gc-percent", "0", func(_ *testing.T, f *flags) bool { return f.gcPercent == 0 }},
		{"min-sync-interval", "3s", func(t *testing.T, f *flags) bool { return agentOpts(t, f).MinSyncInterval == 3*time.Second }},
		{"watch-serviceimports", "false", func(t *testing.T, f *flags) bool { return !agentOpts(t, f).WatchServiceImports }},
		{"cluster-id", "east", func(t *testing.T, f *flags) bool { return agentOpts(t, f).ClusterID == "east" }},
		{"cleanup", "true", func(_ *testing.T, f *flags) bool { return f.cleanup }},
		{"metrics-bind-address", ":9100", func(_ *testing.T, f *flags) bool { return f.managerOptions(nil).Metrics.BindAddress == ":9100" }},
		{"health-probe-bind-address", ":9101", func(_ *testing.T, f *flags) bool {
			return f.managerOptions(nil).HealthProbeBindAddress == ":9101"
		}},
		{"pprof-bind-address", "127.0.0.1:9102", func(_ *testing.T, f *flags) bool {
			return f.managerOptions(nil).PprofBindAddress == "127.0.0.1:9102"
		}},
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f := bindFlags(fs)
	covered := map[string]bool{}
	var args []string
	for _, r := range rows {
		fl := fs.Lookup(r.flag)
		if fl == nil {
			t.Fatalf("no flag --%s", r.flag)
		}
		if fl.DefValue == r.value {
			t.Fatalf("--%s=%s is its default; the row proves nothing", r.flag, r.value)
		}
		covered[r.flag] = true
		args = append(args, "--"+r.flag+"="+r.value)
	}
	fs.VisitAll(func(fl *flag.Flag) {
		if !covered[fl.Name] {
			t.Errorf("--%s has no row: show where it lands", fl.Name)
		}
	})
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if !r.landed(t, f) {
			t.Errorf("--%s=%s did not reach the agent", r.flag, r.value)
		}
	}
}

func agentOpts(t *testing.T, f *flags) agent.Options {
	t.Helper()
	opts, err := f.agentOptions(testr.New(t))
	if err != nil {
		t.Fatalf("agent options: %v", err)
	}
	return opts
}

// An interval of 0 is refused by the agent's own rule, naming the interval.
func TestZeroIntervalsAreRefused(t *testing.T) {
	for _, flagName := range []string{"sync-period", "drift-check-period", "min-sync-interval"} {
		f, err := parse(t, "--node-name=n", "--dataplane=dry-run", "--"+flagName+"=0s")
		if err != nil {
			t.Fatal(err)
		}
		_, err = f.agentOptions(testr.New(t))
		if err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("--%s=0s: %v, want a refusal", flagName, err)
		}
	}
}

// Both families' dataplanes program one network namespace: they must share what they know of
// its ruleset generation, or each family's write makes the other's drift check read its table.
func TestBothFamiliesShareOneGenerations(t *testing.T) {
	f, err := parse(t, "--node-name=n", "--ip-families=IPv4,IPv6")
	if err != nil {
		t.Fatal(err)
	}
	opts := f.dataplaneOptions()
	if len(opts) != 2 || opts[0].Generations == nil || opts[0].Generations != opts[1].Generations {
		t.Fatalf("dataplane options %+v: want two families sharing one Generations", opts)
	}
}
