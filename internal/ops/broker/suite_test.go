package broker_test

import (
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/fleetslice/fleetslice/internal/lab/testenv"
)

// brokerEnv is one envtest API server the specs prepare as a broker with broker.Prepare.
var brokerEnv *testenv.Cluster

func TestBrokerAdmission(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(30 * time.Second)
	RunSpecs(t, "broker admission suite")
}

var _ = BeforeSuite(func(_ SpecContext) {
	var err error
	brokerEnv, err = testenv.Start("broker")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(brokerEnv.Stop)
}, NodeTimeout(5*time.Minute))
