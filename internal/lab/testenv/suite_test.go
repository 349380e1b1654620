package testenv_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

var clusters []*testenv.Cluster

func TestTestenv(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "testenv harness suite")
}

var _ = BeforeSuite(func() {
	// Two control planes prove that multi-cluster suites can run several in one process.
	for _, name := range []string{"member-a", "member-b"} {
		c, err := testenv.Start(name)
		Expect(err).NotTo(HaveOccurred())
		clusters = append(clusters, c)
	}
})

var _ = AfterSuite(func() {
	for _, c := range clusters {
		Expect(c.Stop()).To(Succeed())
	}
})
