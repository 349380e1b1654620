package agentbench

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// fullEnv names the variable that turns on TestFullSizes, which runs the part as
// `fleetslice bench agent` does, at full size: minutes, not a unit test.
const fullEnv = "FLEETSLICE_AGENT_BENCH_FULL"

// TestFullSizes runs the whole part and prints its tables; extra flags come from
// FLEETSLICE_AGENT_BENCH_ARGS (space separated).
func TestFullSizes(t *testing.T) {
	if os.Getenv(fullEnv) != "1" {
		t.Skip("set " + fullEnv + "=1 to run the agent part at full size")
	}
	start := time.Now()
	rep, _ := runPart(t, false, strings.Fields(os.Getenv("FLEETSLICE_AGENT_BENCH_ARGS"))...)
	t.Logf("the full agent part took %s", time.Since(start).Round(time.Second))
	fmt.Println(rep.Intro)
	for _, tab := range rep.Tables {
		fmt.Printf("\n%s\n\n| %s |\n", tab.Caption, strings.Join(tab.Header, " | "))
		for _, row := range tab.Rows {
			fmt.Printf("| %s |\n", strings.Join(row, " | "))
		}
	}
	fmt.Println()
	for _, c := range rep.Checks {
		fmt.Printf("check %q: passed=%v %s\n", c.Name, c.Passed(), c.Failure)
	}
	for _, c := range rep.Checks {
		if !c.Passed() {
			t.Errorf("invariant broken: %s: %s", c.Name, c.Failure)
		}
	}
}
