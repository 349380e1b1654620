package datapathbench

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// sleeper is a client Pod: the requests run inside its network namespace.
func sleeper() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: objectMeta(namespace, clientPod), Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Name: "client", Image: "docker.io/library/busybox:1.37", Command: []string{"sleep", "infinity"},
	}}}}
}

// echoPod answers every connection on 8080 with its name. With a flag, it is ready while that
// file is missing, so the bench decides when it becomes ready and not ready while its listener
// keeps answering whoever still reaches it; without one, it is ready while it listens.
func echoPod(name, flag string) *corev1.Pod {
	c := corev1.Container{
		Name: "echo", Image: "docker.io/alpine/socat:1.8.0.3",
		Command: []string{"socat", "TCP-LISTEN:8080,fork,reuseaddr", "SYSTEM:echo $(POD_NAME)"},
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		Ports: []corev1.ContainerPort{{Name: "tcp", ContainerPort: 8080}},
		ReadinessProbe: &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
			PeriodSeconds: 1, FailureThreshold: 1,
		},
	}
	if flag != "" {
		c.ReadinessProbe.ProbeHandler = corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"test", "!", "-e", flag}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"app": service}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: ptr.To[int64](0)},
	}
}

func serviceExport(name string) *mcsv1beta1.ServiceExport {
	return &mcsv1beta1.ServiceExport{ObjectMeta: objectMeta(namespace, name)}
}

func serviceImport() *mcsv1beta1.ServiceImport {
	return &mcsv1beta1.ServiceImport{ObjectMeta: objectMeta(namespace, service)}
}

// backgroundName names the i-th of the Services that make up the ClusterSet's size.
func backgroundName(i int) string { return fmt.Sprintf("bg-%04d", i) }

// background is the i-th Service the ClusterSet holds besides the sampled one: exported, with
// two ready endpoints in an EndpointSlice the bench writes itself (the Service has no selector),
// so every member imports and programs it like any other without a process per endpoint. Their
// addresses lie at the top of the exporter's first Node's Pod range, which kwok never reaches
// here; no request is ever sent to them.
func background(i int) (*corev1.Service, *discoveryv1.EndpointSlice, *mcsv1beta1.ServiceExport) {
	name := backgroundName(i)
	svc := &corev1.Service{ObjectMeta: objectMeta(namespace, name), Spec: corev1.ServiceSpec{
		Ports: []corev1.ServicePort{{Name: "tcp", Port: 80, TargetPort: intstr.FromInt32(8080)}},
	}}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name + "-bench", Labels: map[string]string{
			discoveryv1.LabelServiceName: name, discoveryv1.LabelManagedBy: "bench.fleetslice.io",
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("tcp"), Port: ptr.To[int32](8080), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	for _, addr := range []string{"10.1.1.250", "10.1.1.251"} {
		slice.Endpoints = append(slice.Endpoints, discoveryv1.Endpoint{
			Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return svc, slice, serviceExport(name)
}
