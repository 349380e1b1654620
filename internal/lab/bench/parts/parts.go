// Package parts lists the parts of `fleetslice bench`. Adding a part is one entry here: a
// bench.Part whose Run measures it. Parts that are not implemented are not listed.
package parts

import (
	"github.com/fleetslice/fleetslice/internal/lab/bench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/agentbench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/datapathbench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/dnsbench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/mcsbench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/rolloutbench"
	"github.com/fleetslice/fleetslice/internal/lab/bench/slicediff"
	"github.com/fleetslice/fleetslice/internal/lab/bench/topologybench"
)

// All returns a fresh instance of every part, in the order docs/benchmarks.md shows them. Each
// call builds new parts, so each command gets its own flag values.
func All() []bench.Part {
	return []bench.Part{
		slicediff.Part(),
		rolloutbench.Part(),
		topologybench.Part(),
		topologybench.LocalityPart(),
		topologybench.TiersPart(),
		mcsbench.Part(),
		agentbench.Part(),
		dnsbench.Part(),
		datapathbench.Part(),
	}
}
