package testutil

import (
	"os"
	"strings"
	"testing"
)

// RequireKernelEnv names the variable CI sets so that a machine unable to run real-kernel tests
// fails them instead of skipping them.
const RequireKernelEnv = "FLEETSLICE_REQUIRE_KERNEL_TESTS"

// RequireKernel skips the test when anything is missing (root, a binary, namespaces), naming it;
// under FLEETSLICE_REQUIRE_KERNEL_TESTS=1 it fails instead.
func RequireKernel(tb testing.TB, what string, missing []string) {
	tb.Helper()
	if len(missing) == 0 {
		return
	}
	msg := what + " needs " + strings.Join(missing, " and ")
	if os.Getenv(RequireKernelEnv) == "1" {
		tb.Fatal(msg + " (" + RequireKernelEnv + "=1 forbids skipping)")
	}
	tb.Skip(msg)
}
