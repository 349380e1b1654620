package testenv_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

var _ = Describe("the envtest harness", func() {
	It("serves the mcs-api v1beta1 CRDs in every control plane", func(ctx SpecContext) {
		for _, c := range clusters {
			for _, name := range []string{"serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io"} {
				crd := &apiextensionsv1.CustomResourceDefinition{}
				Expect(c.Client.Get(ctx, client.ObjectKey{Name: name}, crd)).To(Succeed(), "%s in %s", name, c.Name)
				served := false
				for _, v := range crd.Spec.Versions {
					served = served || (v.Name == "v1beta1" && v.Served)
				}
				Expect(served).To(BeTrue(), "%s serves v1beta1 in %s", name, c.Name)
			}
		}
	})

	It("creates and reads back a ServiceExport, independently per control plane", func(ctx SpecContext) {
		a, b := clusters[0].Client, clusters[1].Client
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "harness-"}}
		Expect(a.Create(ctx, ns)).To(Succeed())
		export := &mcsv1beta1.ServiceExport{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "web"}}
		Expect(a.Create(ctx, export)).To(Succeed())

		got := &mcsv1beta1.ServiceExport{}
		Expect(a.Get(ctx, client.ObjectKeyFromObject(export), got)).To(Succeed())
		Expect(got.UID).To(Equal(export.UID))
		Expect(got.CreationTimestamp.IsZero()).To(BeFalse())

		err := b.Get(ctx, client.ObjectKeyFromObject(export), &mcsv1beta1.ServiceExport{})
		Expect(err).To(HaveOccurred(), "the second control plane must not see the first one's objects")
	})
})
