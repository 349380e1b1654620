package netlinkenc

import (
	"fmt"

	"github.com/google/nftables"

	"github.com/fleetslice/fleetslice/agent/dataplane/ruleset"
)

var (
	chainTypes = map[ruleset.ChainType]nftables.ChainType{
		ruleset.NATChain: nftables.ChainTypeNAT, ruleset.FilterChain: nftables.ChainTypeFilter,
	}
	hooks = map[ruleset.Hook]*nftables.ChainHook{
		ruleset.Prerouting: nftables.ChainHookPrerouting, ruleset.Input: nftables.ChainHookInput,
		ruleset.Forward: nftables.ChainHookForward, ruleset.Output: nftables.ChainHookOutput,
		ruleset.Postrouting: nftables.ChainHookPostrouting,
	}
	priorities = map[ruleset.Priority]nftables.ChainPriority{
		ruleset.DNATPriority: -100, ruleset.SNATPriority: 100, ruleset.FilterPriority: 0,
	}
)

// Chain describes c in table.
func Chain(table *nftables.Table, c *ruleset.Chain) (*nftables.Chain, error) {
	out := &nftables.Chain{Name: c.Name, Table: table}
	if c.Base == nil {
		return out, nil
	}
	t, okType := chainTypes[c.Base.Type]
	hook := hooks[c.Base.Hook]
	prio, okPrio := priorities[c.Base.Priority]
	if !okType || hook == nil || !okPrio {
		return nil, fmt.Errorf("chain %s: unsupported type, hook or priority", c.Name)
	}
	out.Type, out.Hooknum, out.Priority = t, hook, nftables.ChainPriorityRef(prio)
	return out, nil
}
