package podnet

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// containerSpec is what runs for one container: its argv and environment as a kubelet would
// build them, and why it cannot run when it cannot.
type containerSpec struct {
	Name string
	Argv []string
	Env  []string
	// Problems are parts of the spec the local runtime cannot honour (a fieldRef it does not
	// know, a Secret reference): said in an event, the rest still runs.
	Problems []string
}

// specFor builds a container's argv and environment. hostPath is the PATH the host's programs
// are found in; the Pod gets it, as an image would bring its own.
func specFor(pod *corev1.Pod, c *corev1.Container, hostPath string) containerSpec {
	spec := containerSpec{Name: c.Name}
	vars := map[string]string{}
	var order []string
	set := func(name, value string) {
		if _, ok := vars[name]; !ok {
			order = append(order, name)
		}
		vars[name] = value
	}
	// The kubelet's own variables come first, so a container's env may override them.
	set("PATH", hostPath)
	set("HOSTNAME", pod.Name)
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			set(e.Name, expand(e.Value, vars))
		case e.ValueFrom.FieldRef != nil:
			v, ok := fieldValue(pod, e.ValueFrom.FieldRef.FieldPath)
			if !ok {
				spec.Problems = append(spec.Problems, fmt.Sprintf("env %s: fieldRef %s is not supported by the local ClusterSet", e.Name, e.ValueFrom.FieldRef.FieldPath))
				continue
			}
			set(e.Name, v)
		default:
			spec.Problems = append(spec.Problems, fmt.Sprintf("env %s: only literal values and fieldRefs are supported by the local ClusterSet", e.Name))
		}
	}
	if len(c.EnvFrom) > 0 {
		spec.Problems = append(spec.Problems, "envFrom is not supported by the local ClusterSet")
	}
	for _, name := range order {
		spec.Env = append(spec.Env, name+"="+vars[name])
	}
	for _, arg := range append(append([]string{}, c.Command...), c.Args...) {
		spec.Argv = append(spec.Argv, expand(arg, vars))
	}
	return spec
}

// fieldValue answers the downward API's fieldRefs a kubelet answers from the Pod object.
func fieldValue(pod *corev1.Pod, path string) (string, bool) {
	switch path {
	case "metadata.name":
		return pod.Name, true
	case "metadata.namespace":
		return pod.Namespace, true
	case "metadata.uid":
		return string(pod.UID), true
	case "spec.nodeName":
		return pod.Spec.NodeName, true
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, true
	case "status.hostIP":
		return pod.Status.HostIP, true
	case "status.podIP":
		return pod.Status.PodIP, true
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), true
	}
	if key, ok := strings.CutPrefix(path, "metadata.labels['"); ok {
		return pod.Labels[strings.TrimSuffix(key, "']")], true
	}
	if key, ok := strings.CutPrefix(path, "metadata.annotations['"); ok {
		return pod.Annotations[strings.TrimSuffix(key, "']")], true
	}
	return "", false
}

// expand replaces $(NAME) with a defined variable's value and $$ with $, and leaves a reference
// to an undefined variable as it is: Kubernetes's rules for env values, command and args.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
