package agent

import (
	"context"
	"errors"

	"github.com/fleetslice/fleetslice/agent/dataplane"
)

// DriftChecker is a Dataplane that can compare the kernel's table with what
// it last programmed and make its next sync a full one, which repairs what
// differs, when they differ.
// *dataplane.Syncer is one: made with NewNetlink or NewKernelNft it reads the
// table back, otherwise (dry runs) it answers dataplane.ErrDriftUnsupported,
// which the agent ignores.
type DriftChecker interface {
	CheckDrift(ctx context.Context) (dataplane.DriftCheck, error)
}

// checkDrift runs every dataplane's drift check and reports whether any
// found drift, which the caller repairs with a full sync.
func (a *Agent) checkDrift(ctx context.Context) bool {
	drifted := false
	for i, dp := range a.opts.Dataplanes {
		dc, ok := dp.(DriftChecker)
		if !ok {
			continue
		}
		res, err := dc.CheckDrift(ctx)
		switch {
		case errors.Is(err, dataplane.ErrDriftUnsupported):
			continue
		case err != nil:
			driftChecks.WithLabelValues(DriftCheckError).Inc()
			a.log.Error(err, "checking the nftables table for drift failed; the periodic full sync still repairs it", "dataplane", i)
			continue
		case res.Listed:
			driftChecks.WithLabelValues(DriftCheckListed).Inc()
		default:
			driftChecks.WithLabelValues(DriftCheckUnchanged).Inc()
		}
		if res.Drift == nil {
			continue
		}
		drifted = true
		tableDrift.WithLabelValues(res.Drift.Kind).Inc()
		a.log.Info("nftables table changed behind the agent's back; repairing it", "dataplane", i,
			"family", res.Family, "kind", res.Drift.Kind, "detail", res.Drift.Detail)
	}
	return drifted
}
